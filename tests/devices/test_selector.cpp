// The device selector grammar on made-up device lists: selector.hpp alone, no driver and no OpenCL needed.
#include <clpool/devices/selector.hpp>

#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <vector>

using namespace clpool;

namespace {

DeviceDescription fake(std::size_t index, std::size_t p, std::size_t d, std::string platform, std::string vendor,
                       std::string name, DeviceType type) {
    DeviceDescription x;
    x.index = index;
    x.platform_index = p;
    x.device_index = d;
    x.platform_name = std::move(platform);
    x.platform_vendor = std::move(vendor);
    x.device_name = std::move(name);
    x.type = type;
    return x;
}

// Two platforms: PoCL with a CPU device, then NVIDIA with two GPUs.
std::vector<DeviceDescription> two_platforms() {
    return {fake(0, 0, 0, "Portable Computing Language", "The pocl project", "pthread-skylake", DeviceType::cpu),
            fake(1, 1, 0, "NVIDIA CUDA", "NVIDIA Corporation", "NVIDIA H100 80GB HBM3", DeviceType::gpu),
            fake(2, 1, 1, "NVIDIA CUDA", "NVIDIA Corporation", "NVIDIA GeForce RTX 4090", DeviceType::gpu)};
}

DeviceMatch ocl(std::size_t i) { return {BackendKind::opencl, i}; }
const DeviceMatch host_match{BackendKind::host, 0};

std::string error_of(std::string_view spec, const std::vector<DeviceDescription>& devices) {
    try {
        match_device(spec, devices, "CLPOOL_DEVICE");
    } catch (const config_error& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("match_device: auto prefers a GPU, then any OpenCL device, then the host backend") {
    const auto devs = two_platforms();
    CHECK(match_device("auto", devs) == ocl(1));
    CHECK(match_device("AUTO", devs) == ocl(1));
    const std::vector<DeviceDescription> cpu_only(devs.begin(), devs.begin() + 1);
    CHECK(match_device("auto", cpu_only) == ocl(0));
    CHECK(match_device("auto", {}) == host_match);
    CHECK(match_device("host", devs) == host_match);
}

TEST_CASE("match_device: types, indices, platform:device pairs and names") {
    const auto devs = two_platforms();
    CHECK(match_device("gpu", devs) == ocl(1));
    CHECK(match_device("cpu", devs) == ocl(0));
    CHECK(match_device("2", devs) == ocl(2));
    CHECK(match_device("0", devs) == ocl(0));
    CHECK(match_device("1:1", devs) == ocl(2));
    CHECK(match_device("0:0", devs) == ocl(0));
    CHECK(match_device("platform:nvidia", devs) == ocl(1));
    CHECK(match_device("platform:pocl", devs) == ocl(0));  // the vendor string matches too
    CHECK(match_device("platform:Portable", devs) == ocl(0));
    CHECK(match_device("device:4090", devs) == ocl(2));
    CHECK(match_device("pocl", devs) == ocl(0));
    CHECK(match_device("nvidia", devs) == ocl(1));
    CHECK(match_device("NVIDIA", devs) == ocl(1));
    CHECK(match_device("device:rtx", devs) == ocl(2));
    CHECK(match_device("device:GeForce RTX", devs) == ocl(2));  // several words, in a row
    CHECK(match_device("device:h100", devs) == ocl(1));
    CHECK(match_device("platform:portable computing", devs) == ocl(0));
}

namespace {
// PoCL on an AMD EPYC host, with no AMD platform: "amd" names the CPU's vendor only in PoCL's device name.
std::vector<DeviceDescription> pocl_on_epyc() {
    return {fake(0, 0, 0, "Portable Computing Language", "The pocl project", "pthread-skylake-avx512-AMD EPYC 7B13",
                 DeviceType::cpu)};
}
}  // namespace

TEST_CASE("match_device: TEXT matches whole words, and a bare TEXT names a platform, not a device name") {
    const auto devs = pocl_on_epyc();
    // `amd` is a vendor: the docs' example of a selector that matches nothing here.
    CHECK(error_of("amd", devs).find("CLPOOL_DEVICE='amd' matches no device: no platform") != std::string::npos);
    CHECK(error_of("platform:amd", devs).find("no platform name or vendor has the whole words 'amd'") !=
          std::string::npos);
    // The error points at the selector that would have matched the device name: docs/DEVICES.md's example.
    CHECK(error_of("amd", devs)
              .rfind(
                  "clpool: CLPOOL_DEVICE='amd' matches no device: no platform name or vendor has the whole words 'amd' "
                  "(a plain TEXT names a platform); device:amd selects device 0 by its name. Devices:\n"
                  "  0 (0:0) cpu 'pthread-skylake-avx512-AMD EPYC 7B13' on platform 'Portable Computing Language' (The "
                  "pocl project)\n  host (the host backend: aligned host memory)\n",
                  0) == 0);
    // Letters inside a word do not match: "x" is not a word of "avx512", nor "avx" nor "sky".
    for (const char* part : {"x", "device:x", "avx", "device:avx", "device:sky", "device:7b", "platform:port",
                             "platform:poc", "device:epyc7b13"}) {
        CAPTURE(part);
        CHECK(error_of(part, devs).find("matches no") != std::string::npos);
    }
    // Whole words match, whatever their case and whatever separates them.
    CHECK(match_device("device:amd", devs) == ocl(0));
    CHECK(match_device("device:AVX512", devs) == ocl(0));
    CHECK(match_device("device:epyc-7b13", devs) == ocl(0));
    CHECK(match_device("device:Skylake AVX512", devs) == ocl(0));
    CHECK(match_device("POCL", devs) == ocl(0));
    CHECK(match_device("platform:The pocl project", devs) == ocl(0));
    // Words must be in a row: "skylake amd" skips avx512.
    CHECK(error_of("device:skylake amd", devs).find("no device name has the whole words 'skylake amd'") !=
          std::string::npos);
    // Nothing to match: no letter or digit.
    CHECK(error_of("device:--", devs).find("no letter or digit") != std::string::npos);
    CHECK(error_of("-", devs).find("no letter or digit") != std::string::npos);
}

TEST_CASE("match_device: an empty selector is an error, as an empty CLPOOL_DEVICE is") {
    const auto devs = two_platforms();
    for (const char* empty : {"", " ", "\t "}) {
        CAPTURE(empty);
        CHECK(error_of(empty, devs).find("is empty") != std::string::npos);
        CHECK(error_of(empty, {}).find("is empty") != std::string::npos);
    }
}

// CLPOOL_DEVICE="  gpu " is trimmed (config::parse_device_spec), and so are select_device(" gpu")
// and a tool's --device " gpu": untrimmed, " gpu" is no type word and would be read as a platform
// name and refused ("no platform name or vendor has the whole words 'gpu'"), " 1" would be no
// index, and "host " would match nothing.
TEST_CASE("match_device: spaces and tabs around a selector are trimmed, as CLPOOL_DEVICE's are") {
    const auto devs = two_platforms();
    CHECK(match_device(" gpu", devs) == ocl(1));
    CHECK(match_device("cpu\t", devs) == ocl(0));
    CHECK(match_device(" auto ", devs) == ocl(1));
    CHECK(match_device("host ", devs) == host_match);
    CHECK(match_device(" 2", devs) == ocl(2));
    CHECK(match_device("\t1:1 ", devs) == ocl(2));
    CHECK(match_device(" device:rtx 4090 ", devs) == ocl(2));
    CHECK(match_device(" pocl", devs) == ocl(0));
    // The error still quotes the selector as given.
    CHECK(error_of(" 7 ", devs).find("CLPOOL_DEVICE=' 7 ' is out of range") != std::string::npos);
}

TEST_CASE("match_device: a selector that matches nothing names itself and lists every device") {
    const auto devs = two_platforms();
    for (const char* bad : {"accelerator", "3", "0:1", "2:0", "platform:amd", "device:mi300", "amd", "rtx",
                            "platform:", "gpu:0", "-1", "99999999999", "", "x", "device:nvidia h100 80"}) {
        CAPTURE(bad);
        const auto msg = error_of(bad, devs);
        CHECK(msg.find("CLPOOL_DEVICE='" + std::string(bad) + "'") != std::string::npos);
        CHECK(msg.find("NVIDIA GeForce RTX 4090") != std::string::npos);
        CHECK(msg.find("pthread-skylake") != std::string::npos);
        CHECK(msg.find("host") != std::string::npos);
    }
    CHECK(error_of("gpu", {}).find("no OpenCL device found") != std::string::npos);
    CHECK(error_of("0", {}).find("out of range") != std::string::npos);
}

// The grammar's N and P:D are any run of digits, whatever its length: "0000000002" (N with
// leading zeros) and "0000000001:1" (P:D) are indices, not TEXT to fail as a platform name or an
// unknown prefix, and "99999999999" is out of range, not a word no platform has.
TEST_CASE("match_device: N and P:D of more than 9 digits are indices, with leading zeros or out of range") {
    const auto devs = two_platforms();
    CHECK(error_of("0000000002", devs) == "no error");
    if (error_of("0000000002", devs) == "no error") CHECK(match_device("0000000002", devs) == ocl(2));
    CHECK(error_of("0000000001:0000000001", devs) == "no error");
    if (error_of("0000000001:0000000001", devs) == "no error")
        CHECK(match_device("0000000001:0000000001", devs) == ocl(2));
    CHECK(error_of("99999999999", devs).find("CLPOOL_DEVICE='99999999999' is out of range: 3 OpenCL device(s)") !=
          std::string::npos);
    CHECK(error_of("99999999999999999999999", devs).find("is out of range") != std::string::npos);
    CHECK(error_of("1:99999999999", devs).find("names no device (platform:device indices)") != std::string::npos);
}
