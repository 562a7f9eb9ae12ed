// The reuse-ordering protocol (reuse_order.hpp) on fake queues and events: no driver, no LD_PRELOAD.
#include "reuse_order.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <list>
#include <string>
#include <vector>

using namespace clpool::interpose::reuse;

namespace {

// The fake driver: every call is logged as text ("marker q1", "wait q2 on e1"),
// and events count their references so a test can see none leaked.
struct FakeEvent {
    int refs = 1;  // the creator's reference, handed to the protocol
    bool complete = false;
};

struct Fake {
    std::vector<FakeEvent> events;  // event eN is events[N - 1]
    std::vector<std::string> log;
    bool enqueue_fails = false;     // markers and barriers cannot be enqueued
} g;

cl_command_queue queue(int n) { return reinterpret_cast<cl_command_queue>(static_cast<std::uintptr_t>(n)); }
std::string name(cl_command_queue q) { return "q" + std::to_string(reinterpret_cast<std::uintptr_t>(q)); }
std::size_t index(cl_event e) { return reinterpret_cast<std::uintptr_t>(e) - 1; }
std::string name(cl_event e) { return "e" + std::to_string(index(e) + 1); }
FakeEvent& fake(cl_event e) { return g.events.at(index(e)); }

cl_event new_event() {
    g.events.push_back({});
    return reinterpret_cast<cl_event>(static_cast<std::uintptr_t>(g.events.size()));
}

cl_event fake_marker(cl_command_queue q) {
    if (g.enqueue_fails) return nullptr;
    cl_event e = new_event();
    g.log.push_back("marker " + name(q) + " = " + name(e));
    return e;
}
cl_event fake_barrier(cl_command_queue q) {
    if (g.enqueue_fails) return nullptr;
    cl_event e = new_event();
    g.log.push_back("barrier " + name(q) + " = " + name(e));
    return e;
}
void fake_wait_behind(cl_command_queue q, cl_uint n, const cl_event* events) {
    std::string line = "wait " + name(q) + " on";
    for (cl_uint i = 0; i < n; ++i) line += " " + name(events[i]);
    g.log.push_back(line);
}
void fake_finish(cl_command_queue q) { g.log.push_back("finish " + name(q)); }
bool fake_complete(cl_event e) { return fake(e).complete; }
bool fake_retain(cl_event e) {
    if (fake(e).refs <= 0) return false;
    ++fake(e).refs;
    return true;
}
void fake_release(cl_event e) {
    REQUIRE(fake(e).refs > 0);
    --fake(e).refs;
}

constexpr Driver fake_driver{fake_marker,   fake_barrier, fake_wait_behind, fake_finish,
                             fake_complete, fake_retain,  fake_release};

// The caller's buffers: live, or cached (back in the pool).
struct Buf {
    BufferMark mark;
    bool cached = false;
};

struct FakeBuffers final : Buffers {
    std::list<Buf> all;  // a list: references stay valid when others go
    int gave_back = 0;
    Buf& add() { return all.emplace_back(); }
    void each(const std::function<void(BufferMark&, bool cached)>& f) override {
        for (Buf& b : all) f(b.mark, b.cached);
    }
    void give_back_cache() override {
        ++gave_back;
        all.remove_if([](const Buf& b) { return b.cached; });
    }
};

// One context: its protocol, its buffers, and a clean fake driver.
struct World {
    World() { g = Fake{}; }
    ContextOrder order{fake_driver};
    FakeBuffers bufs;

    // A buffer released and cached, as the core does on the application's last release.
    std::vector<cl_event> release(Buf& b) {
        b.cached = true;
        return order.release(b.mark);
    }
    // Every event reference the protocol took has gone back once it closed and its buffers are gone.
    void check_no_leaks() {
        order.close();
        bufs.all.clear();
        for (std::size_t i = 0; i < g.events.size(); ++i) {
            CAPTURE(i + 1);
            CHECK(g.events[i].refs == 0);
        }
    }
};

cl_event event(int n) { return reinterpret_cast<cl_event>(static_cast<std::uintptr_t>(n)); }

// Hands the caller's references back, as the pool does once it no longer needs them.
void drop(const std::vector<cl_event>& events) {
    for (cl_event e : events) fake_release(e);
}

using log_t = std::vector<std::string>;

}  // namespace

TEST_SUITE("interposer reuse order") {
    TEST_CASE("a lone in-order queue: a release needs no marker and the bucket serves again at once") {
        World w;
        w.order.add_queue(queue(1), true, w.bufs);
        CHECK(w.order.lone_queue() == queue(1));
        Buf& a = w.bufs.add();
        CHECK(w.release(a).empty());
        CHECK(a.mark.unfenced == 1);
        CHECK(w.order.released() == 1);
        CHECK(w.order.covered() == 0);
        const Reissue r = w.order.reissue(a.mark, false);
        CHECK_FALSE(r.wait);
        CHECK(g.log.empty());
        w.check_no_leaks();
    }

    TEST_CASE("an out-of-order lone queue is no lone queue: a release waits for a marker") {
        World w;
        w.order.add_queue(queue(1), false, w.bufs);
        CHECK(w.order.lone_queue() == nullptr);
        Buf& a = w.bufs.add();
        const auto events = w.release(a);
        CHECK(events == std::vector<cl_event>{event(1)});
        CHECK(g.log == log_t{"marker q1 = e1"});
        CHECK(a.mark.unfenced == 0);
        drop(events);
        w.check_no_leaks();
    }

    TEST_CASE("a second queue: one marker on the first fences every earlier unfenced release") {
        World w;
        w.order.add_queue(queue(1), true, w.bufs);
        Buf& a = w.bufs.add();
        Buf& b = w.bufs.add();
        CHECK(w.release(a).empty());
        CHECK(w.release(b).empty());
        w.order.add_queue(queue(2), true, w.bufs);
        CHECK(g.log == log_t{"marker q1 = e1"});  // one marker, and no barrier: nothing unfenced was handed out
        CHECK(a.mark.fence.get() == event(1));
        CHECK(b.mark.fence.get() == event(1));
        CHECK(a.mark.unfenced == 0);
        CHECK(w.order.covered() == w.order.released());
        CHECK(w.order.lone_queue() == nullptr);

    // A cached bucket waits for that marker before it serves again.
        Reissue r = w.order.reissue(a.mark, false);
        CHECK(r.wait);
        CHECK(r.events == std::vector<cl_event>{event(1)});
        drop(r.events);
        fake(event(1)).complete = true;
        CHECK_FALSE(w.order.reissue(a.mark, false).wait);

    // From now on every release waits for a marker on each queue.
        Buf& c = w.bufs.add();
        const auto events = w.release(c);
        CHECK(events == std::vector<cl_event>{event(2), event(3)});
        CHECK(g.log == log_t{"marker q1 = e1", "marker q1 = e2", "marker q2 = e3"});
        drop(events);
        w.check_no_leaks();
    }

    TEST_CASE("a second queue with nothing released unfenced enqueues nothing") {
        World w;
        w.order.add_queue(queue(1), true, w.bufs);
        w.order.add_queue(queue(2), true, w.bufs);
        CHECK(g.log.empty());
        w.check_no_leaks();
    }

    TEST_CASE("a second queue whose marker cannot be enqueued: the cache goes back to the driver") {
        World w;
        w.order.add_queue(queue(1), true, w.bufs);
        Buf& live = w.bufs.add();
        CHECK(w.release(w.bufs.add()).empty());
        CHECK(w.order.release(live.mark).empty());  // released, then handed out again: live
        g.enqueue_fails = true;
        w.order.add_queue(queue(2), true, w.bufs);
        CHECK(w.bufs.gave_back == 1);
        REQUIRE(w.bufs.all.size() == 1);  // the cached one went
        CHECK(live.mark.unfenced == 0);
        CHECK_FALSE(live.mark.fence);
        CHECK(w.order.covered() == w.order.released());
        w.check_no_leaks();
    }

    TEST_CASE("the lone queue's release: its marker fences earlier releases, and later ones wait for it") {
        World w;
        w.order.add_queue(queue(1), true, w.bufs);
        Buf& a = w.bufs.add();
        CHECK(w.release(a).empty());
        w.order.remove_queue(queue(1), w.bufs);
        CHECK(g.log == log_t{"marker q1 = e1"});
        CHECK(a.mark.fence.get() == event(1));
        CHECK(w.order.covered() == w.order.released());

    // A new lone queue is no lone queue while the released one's marker runs.
        w.order.add_queue(queue(2), true, w.bufs);
        CHECK(w.order.lone_queue() == nullptr);
        Buf& b = w.bufs.add();
        auto events = w.release(b);
        CHECK(events == std::vector<cl_event>{event(1), event(2)});
        CHECK(g.log.back() == "marker q2 = e2");
        drop(events);

        fake(event(1)).complete = true;
        CHECK(w.order.lone_queue() == queue(2));
        CHECK(w.release(w.bufs.add()).empty());
        w.check_no_leaks();
    }

    TEST_CASE("the lone queue's release with no marker: clFinish, and earlier releases need nothing more") {
        World w;
        w.order.add_queue(queue(1), true, w.bufs);
        Buf& a = w.bufs.add();
        CHECK(w.release(a).empty());
        g.enqueue_fails = true;
        w.order.remove_queue(queue(1), w.bufs);
        CHECK(g.log == log_t{"finish q1"});
        CHECK(w.order.covered() == w.order.released());
        CHECK(w.bufs.gave_back == 0);
        w.check_no_leaks();
    }

    TEST_CASE("switching the lone queue out of order: a barrier fences earlier releases") {
        World w;
        w.order.add_queue(queue(1), true, w.bufs);
        Buf& a = w.bufs.add();
        CHECK(w.release(a).empty());
        w.order.set_out_of_order(queue(1), w.bufs);
        CHECK(g.log == log_t{"barrier q1 = e1"});
        CHECK(a.mark.fence.get() == event(1));
        CHECK_FALSE(w.order.in_order(queue(1)));
        CHECK(w.order.lone_queue() == nullptr);

    // Later releases wait for a marker; a second switch does nothing.
        auto events = w.release(w.bufs.add());
        CHECK(events == std::vector<cl_event>{event(2)});
        drop(events);
        w.order.set_out_of_order(queue(1), w.bufs);
        CHECK(g.log == log_t{"barrier q1 = e1", "marker q1 = e2"});
        w.check_no_leaks();
    }

    TEST_CASE("switching out of order with nothing released unfenced enqueues no barrier") {
        World w;
        w.order.add_queue(queue(1), true, w.bufs);
        w.order.set_out_of_order(queue(1), w.bufs);
        CHECK(g.log.empty());
        CHECK(w.order.lone_queue() == nullptr);
        w.check_no_leaks();
    }

    TEST_CASE("clFinish on the lone queue covers the releases before it, not those after") {
        World w;
        w.order.add_queue(queue(1), true, w.bufs);
        Buf& a = w.bufs.add();
        Buf& b = w.bufs.add();
        CHECK(w.release(a).empty());
        const std::uint64_t count = w.order.finish_begins(queue(1));
        CHECK(count == 1);
        CHECK(w.release(b).empty());  // while clFinish runs on another thread
        w.order.finished(count);
        CHECK(w.order.covered() == 1);

    // A second queue fences only b: a's old commands have completed.
        w.order.add_queue(queue(2), true, w.bufs);
        CHECK(g.log == log_t{"marker q1 = e1"});
        CHECK_FALSE(a.mark.fence);
        CHECK(b.mark.fence.get() == event(1));
        CHECK(w.order.finish_begins(queue(1)) == 0);  // no longer the lone queue
        w.check_no_leaks();
    }

    TEST_CASE("clFinish on the lone queue after every release: a second queue needs no marker") {
        World w;
        w.order.add_queue(queue(1), true, w.bufs);
        CHECK(w.release(w.bufs.add()).empty());
        CHECK(w.release(w.bufs.add()).empty());
        w.order.finished(w.order.finish_begins(queue(1)));
        w.order.add_queue(queue(2), true, w.bufs);
        CHECK(g.log.empty());
        w.check_no_leaks();
    }

    TEST_CASE("the core's COPY_HOST_PTR write never takes an unfenced bucket") {
        World w;
        w.order.add_queue(queue(1), true, w.bufs);
        Buf& a = w.bufs.add();
        CHECK(w.release(a).empty());
        CHECK_FALSE(w.order.reissue(a.mark, false).wait);  // the application's own queue would order it
        CHECK(g.log.empty());

        Reissue r = w.order.reissue(a.mark, true);
        CHECK(r.wait);
        CHECK(r.events == std::vector<cl_event>{event(1)});
        CHECK(g.log == log_t{"marker q1 = e1"});
        CHECK(a.mark.unfenced == 0);
        drop(r.events);
        CHECK_FALSE(w.order.reissue(a.mark, true).wait);  // fenced now: the pool held it behind the marker

    // A release a clFinish covered is safe for the core's write too.
        Buf& b = w.bufs.add();
        CHECK(w.release(b).empty());
        w.order.finished(w.order.finish_begins(queue(1)));
        CHECK_FALSE(w.order.reissue(b.mark, true).wait);
        CHECK(g.log.size() == 1);
        w.check_no_leaks();
    }

    TEST_CASE("a new queue starts behind a barrier while reissued unfenced buffers may have old work pending") {
        World w;
        w.order.add_queue(queue(1), true, w.bufs);
        Buf& a = w.bufs.add();
        CHECK(w.release(a).empty());
        CHECK_FALSE(w.order.reissue(a.mark, false).wait);
        a.cached = false;  // handed out again, its old owner's commands maybe still queued on q1

        w.order.add_queue(queue(2), true, w.bufs);
        CHECK(g.log == log_t{"marker q1 = e1", "wait q2 on e1"});
        CHECK(a.mark.unfenced == 0);
        CHECK_FALSE(a.mark.fence);  // a live buffer waits through the new queues, not the pool

        w.order.add_queue(queue(3), true, w.bufs);
        CHECK(g.log.back() == "wait q3 on e1");
        fake(event(1)).complete = true;
        w.order.add_queue(queue(4), true, w.bufs);
        CHECK(g.log.size() == 3);  // its fence has run: no barrier
        w.check_no_leaks();
    }

}  // TEST_SUITE
