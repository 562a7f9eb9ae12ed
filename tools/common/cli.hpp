// The tools' shared command-line frame: CLI11 parsing, exit codes, errors on stderr.
#pragma once

#include <CLI/CLI.hpp>

#include <clpool/core/errors.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>

#include "devices.hpp"
#include "units.hpp"

namespace clpool::tools {

// Exit codes shared by every tool (docs/TOOLS.md).
enum exit_code : int {
    exit_ok = 0,
    exit_failure = 1,    // the run failed: driver error, out of memory, unwritable output
    exit_bad_input = 2,  // bad arguments or a malformed input file: fix the command line or the file
};

// Bad input found after parsing (a malformed trace, an inconsistent option):
// reported with exit code 2.
class input_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A CLI11 validator for byte sizes ("4KiB", "1GiB", "4096").
inline const CLI::Validator& byte_size() {
    static const CLI::Validator v(
        [](std::string& s) -> std::string {
            if (!parse_bytes(s)) return "'" + s + "' is not a byte size (e.g. 4096, 64KiB, 1GiB)";
            return {};
        },
        "SIZE");
    return v;
}

// A CLI11 transformer for counts (--reps, --warmup): decimal digits only. CLI11 reads integers
// with strtoull's base 0, where "010" is octal 8 and "0x10" is 16; this drops leading zeros
// ("010" is 10) and refuses other bases, signs and blanks.
inline const CLI::Validator& decimal_count() {
    static const CLI::Validator v(
        [](std::string& s) -> std::string {
            if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
                return "'" + s + "' is not a decimal count (e.g. 10)";
            s.erase(0, std::min(s.find_first_not_of('0'), s.size() - 1));
            return {};
        },
        "COUNT");
    return v;
}

// A CLI11 validator for decimal numbers (--factor, --min-hit-rate): "2", "1.5", "1e3".
// CLI11 reads them with strtold, where "0x10" is 16 and "nan" passes a range check;
// this refuses hex, inf, nan, blanks and separators (is_decimal_number).
inline const CLI::Validator& decimal_number() {
    static const CLI::Validator v(
        [](std::string& s) -> std::string {
            if (!is_decimal_number(s)) return "'" + s + "' is not a decimal number (e.g. 1.5, 2 or 1e3)";
            return {};
        },
        "NUMBER");
    return v;
}

// Parses argv with `app`, then runs `body`, mapping outcomes to exit codes:
// --help prints to stdout and returns 0; a parse error, input_error or
// config_error (a bad --device / CLPOOL_DEVICE / CLPOOL_* value) prints
// "<tool>: <what>" and a hint to stderr and returns 2; any other exception returns 1.
template <class Body>
int run_tool(CLI::App& app, int argc, char** argv, Body&& body) {
    const std::string name = app.get_name();
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        std::cout << app.help();
        return exit_ok;
    } catch (const CLI::CallForAllHelp&) {
        std::cout << app.help("", CLI::AppFormatMode::All);
        return exit_ok;
    } catch (const CLI::ParseError& e) {
        std::cerr << name << ": " << e.what() << "\nRun '" << name << " --help' for the options.\n";
        return exit_bad_input;
    }
    try {
        return body();
    } catch (const input_error& e) {
        std::cerr << name << ": " << e.what() << '\n';
        return exit_bad_input;
    } catch (const clpool::config_error& e) {
        std::cerr << name << ": " << e.what()
                  << "\nFix the value (docs/CONFIGURATION.md); 'clpool-info --list' lists the devices.\n";
        return exit_bad_input;
    } catch (const std::bad_alloc& e) {
        std::cerr << name << ": out of memory: " << e.what() << "\nTry smaller sizes (--max) or a smaller trace.\n";
        return exit_failure;
    } catch (const std::exception& e) {
        std::cerr << name << ": " << e.what()
                  << "\nSee docs/TOOLS.md; run with --device host to rule out the driver.\n";
        return exit_failure;
    }
}

// An output stream for PATH, or stdout for "-". Throws std::runtime_error
// naming the path and the OS error when it cannot be opened.
class OutputFile {
public:
    explicit OutputFile(const std::string& path) : path_(path) {
        if (path == "-") return;
        file_ = std::make_unique<std::ofstream>(path);
        if (!*file_) throw std::runtime_error("cannot write '" + path + "': " + std::strerror(errno));
    }
    std::ostream& stream() { return file_ ? static_cast<std::ostream&>(*file_) : std::cout; }
    // Flushes; throws if the write failed (disk full, ...).
    void close() {
        stream().flush();
        if (!stream()) throw std::runtime_error("writing '" + path_ + "' failed");
    }

private:
    std::string path_;
    std::unique_ptr<std::ofstream> file_;
};

}  // namespace clpool::tools
