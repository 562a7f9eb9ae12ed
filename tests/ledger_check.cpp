// A doctest listener, linked into clpool_tests and clpool_stress: after every test case (and every
// pass through its subcases), each MockBackend ledger made during it must have no allocation live.
// A test that used a MockBackend and left a buffer behind fails, named with its file and line,
// whether or not it checked the ledger itself.
#include "mock_backend.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace {

using namespace doctest;

class LedgerCheck : public IReporter {
public:
    explicit LedgerCheck(const ContextOptions&) {}

    void test_case_start(const TestCaseData& tc) override {
        test_ = &tc;
        first_ = clpool::test::LedgerList::instance().next_serial();
        leaked_.clear();
    }
    void test_case_reenter(const TestCaseData&) override { check(); }
    void test_case_end(const CurrentTestCaseStats& stats) override {
        check();
        if (leaked_.empty()) return;
        std::fprintf(stderr, "\n%s:%d: ERROR: test case \"%s\" leaked: a MockBackend ledger still has %s\n",
                     test_->m_file.c_str(), test_->m_line, test_->m_name, leaked_.c_str());
        // The listener runs before the reporters: they see the case as failed. The stats object is
        // doctest's running context (not const), handed to reporters as const.
        auto& s = const_cast<CurrentTestCaseStats&>(stats);
        if (s.testCaseSuccess) ++failed_cases_;
        s.testCaseSuccess = false;
        s.failure_flags |= TestCaseFailureReason::AssertFailure;
    }
    void test_run_end(const TestRunStats& stats) override {
        // The exit code counts failed cases; those that failed only here are added.
        const_cast<TestRunStats&>(stats).numTestCasesFailed += failed_cases_;
    }

    void report_query(const QueryData&) override {}
    void test_run_start() override {}
    void test_case_exception(const TestCaseException&) override {}
    void subcase_start(const SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const AssertData&) override {}
    void log_message(const MessageData&) override {}
    void test_case_skipped(const TestCaseData&) override {}

private:
    void check() {
        clpool::test::LedgerList::instance().for_each_since(first_, [this](const clpool::test::Ledger& l) {
            const long live = l.live.load();
            if (live != 0 && leaked_.empty())  // the first one found is enough to name
                leaked_ = std::to_string(live) + " allocation(s) live (" + std::to_string(l.live_bytes.load()) +
                          " bytes) after the pool and its handles are gone";
        });
    }

    const TestCaseData* test_ = nullptr;
    std::uint64_t first_ = 0;
    std::string leaked_;
    unsigned failed_cases_ = 0;
};

}  // namespace

DOCTEST_REGISTER_LISTENER("ledger_check", 1, LedgerCheck);
