// Times a Halide app as an application runs it: each iteration marks the
// inputs changed on the host (host dirty, so the runtime uploads them), runs
// the pipeline, and copies every output back to the host.
// It links with one app's generated registration (`-e registration`) and a
// Vulkan runtime, as RunGen does, and prints one line of best and median
// milliseconds. RunGen's own --benchmarks leaves inputs and outputs on the
// device, which times the kernels alone.
//
//   time_app ITERATIONS [NAME=[EXTENT,...] ...]
//
// Buffers take the extents given, else their estimates; scalars take their
// estimates. Inputs are filled with a fixed pseudo-random sequence.
#include "HalideBuffer.h"
#include "HalideRuntime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

int (*filter_call)(void **) = nullptr;
const halide_filter_metadata_t *filter_md = nullptr;

[[noreturn]] void fail(const std::string &what) {
    fprintf(stderr, "time_app: %s\n", what.c_str());
    exit(1);
}

std::vector<int> parse_extents(const std::string &name, const std::string &text) {
    std::vector<int> out;
    if (text.size() < 2 || text.front() != '[' || text.back() != ']') {
        fail(name + ": extents must read [N,N,...], not " + text);
    }
    size_t i = 1;
    while (i < text.size() - 1) {
        size_t end = text.find_first_of(",]", i);
        out.push_back(atoi(text.substr(i, end - i).c_str()));
        i = end + 1;
    }
    return out;
}

std::vector<int> estimate(const halide_filter_argument_t &a) {
    std::vector<int> out;
    for (int d = 0; d < a.dimensions; d++) {
        if (!a.buffer_estimates || !a.buffer_estimates[2 * d + 1]) {
            fail(std::string(a.name) + ": no estimate of dimension " + std::to_string(d) + "; give NAME=[...]");
        }
        out.push_back((int)*a.buffer_estimates[2 * d + 1]);
    }
    return out;
}

void fill(Halide::Runtime::Buffer<> &b) {
    uint32_t state = 12345;
    auto next = [&]() {
        state = state * 1664525u + 1013904223u;
        return state >> 8;
    };
    uint8_t *p = (uint8_t *)b.data();
    const size_t bytes = b.size_in_bytes();
    if (b.type().code == halide_type_float) {
        for (size_t i = 0; i + b.type().bytes() <= bytes; i += b.type().bytes()) {
            float f = (next() & 0xffff) / 65536.0f;
            if (b.type().bits == 32) {
                memcpy(p + i, &f, 4);
            } else if (b.type().bits == 64) {
                double v = f;
                memcpy(p + i, &v, 8);
            }
        }
    } else {
        for (size_t i = 0; i < bytes; i++) {
            p[i] = (uint8_t)next();
        }
    }
}

}  // namespace

extern "C" void halide_register_argv_and_metadata(int (*call)(void **), const halide_filter_metadata_t *md,
                                                  const char *const *) {
    filter_call = call;
    filter_md = md;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fail("usage: time_app ITERATIONS [NAME=[EXTENT,...] ...]");
    }
    if (!filter_call) {
        fail("no pipeline registered: link an app's .registration.cpp");
    }
    const int iterations = atoi(argv[1]);
    std::map<std::string, std::vector<int>> given;
    for (int i = 2; i < argc; i++) {
        std::string s = argv[i];
        size_t eq = s.find('=');
        if (eq == std::string::npos) {
            fail("not NAME=[...]: " + s);
        }
        given[s.substr(0, eq)] = parse_extents(s.substr(0, eq), s.substr(eq + 1));
    }
    const int n = filter_md->num_arguments;
    std::vector<Halide::Runtime::Buffer<>> inputs, outputs;
    std::vector<halide_scalar_value_t> scalars(n);
    std::vector<void *> args(n);
    inputs.reserve(n);
    outputs.reserve(n);
    for (int i = 0; i < n; i++) {
        const halide_filter_argument_t &a = filter_md->arguments[i];
        if (a.kind == halide_argument_kind_input_scalar) {
            if (!a.scalar_estimate) {
                fail(std::string(a.name) + ": a scalar without an estimate");
            }
            scalars[i] = *a.scalar_estimate;
            args[i] = &scalars[i];
            continue;
        }
        auto it = given.find(a.name);
        std::vector<int> shape = it != given.end() ? it->second : estimate(a);
        Halide::Runtime::Buffer<> b(a.type, shape);
        if (a.kind == halide_argument_kind_input_buffer) {
            fill(b);
            inputs.push_back(b);
            args[i] = inputs.back().raw_buffer();
        } else {
            outputs.push_back(b);
            args[i] = outputs.back().raw_buffer();
        }
    }
    // As RunGen does: the runtime keeps device memory between iterations.
    halide_reuse_device_allocations(nullptr, true);
    std::vector<double> ms;
    for (int it = 0; it < iterations + 1; it++) {
        for (auto &b : inputs) {
            b.set_host_dirty();
        }
        auto start = std::chrono::steady_clock::now();
        if (int err = filter_call(args.data())) {
            fail("the pipeline returned " + std::to_string(err));
        }
        for (auto &b : outputs) {
            if (int err = b.copy_to_host()) {
                fail("copy_to_host returned " + std::to_string(err));
            }
        }
        double took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        // The first iteration compiles the kernels: not timed.
        if (it > 0) {
            ms.push_back(took);
        }
    }
    std::sort(ms.begin(), ms.end());
    printf("%s best %.3f ms median %.3f ms (%d iterations)\n", filter_md->name, ms.front(), ms[ms.size() / 2],
           iterations);
    return 0;
}
