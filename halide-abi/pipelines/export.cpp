// Times a photo export: the 13 pipelines of export.py in order over one RAW
// frame, each output read back to the host (as the seed's application does),
// on whichever Vulkan runtime this program is linked with.
//
// `export [WIDTH HEIGHT [EXPORTS]]` (default 6000 4000 5: 24 megapixels).
// Prints one JSON line: the median and the minimum milliseconds per export
// and per stage, and a checksum of the result, which every runtime must
// agree on.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "HalideBuffer.h"
#include "HalideRuntimeVulkan.h"

#include "export_01.h"
#include "export_02.h"
#include "export_03.h"
#include "export_04.h"
#include "export_05.h"
#include "export_06.h"
#include "export_07.h"
#include "export_08.h"
#include "export_09.h"
#include "export_10.h"
#include "export_11.h"
#include "export_12.h"
#include "export_13.h"

using Halide::Runtime::Buffer;
using Clock = std::chrono::steady_clock;

static void check(int code, const char *what) {
    if (code != 0) {
        std::fprintf(stderr, "%s returned %d\n", what, code);
        std::exit(1);
    }
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Runs the exports; every buffer is gone when it returns, before the
// device is released.
static void run(int w, int h, int exports) {
    Buffer<uint16_t> raw(w, h), o1(w, h), o2(w, h);
    raw.for_each_element([&](int x, int y) { raw(x, y) = uint16_t((x * 7 + y * 13) ^ (x * y)); });
    Buffer<float> m(3, 3);
    const float mat[3][3] = {{1.6f, -0.4f, -0.2f}, {-0.3f, 1.5f, -0.2f}, {0.0f, -0.5f, 1.5f}};
    m.for_each_element([&](int i, int c) { m(i, c) = mat[c][i]; });
    std::vector<Buffer<float>> f;
    for (int i = 0; i < 7; i++) f.emplace_back(w, h, 3);
    Buffer<float> half(w / 2, h / 2, 3);
    Buffer<uint8_t> u8(w / 2, h / 2, 3), out(w / 2, h / 2, 3);

    std::vector<std::vector<double>> stage_ms(13);
    std::vector<double> export_ms;
    for (int e = 0; e <= exports; e++) {
        raw.set_host_dirty();  // a new frame each export
        m.set_host_dirty();
        auto start = Clock::now();
        auto t = start;
        int s = 0;
        auto step = [&](int code, const char *what, auto &buf) {
            check(code, what);
            check(buf.copy_to_host(), "copy_to_host");
            auto now = Clock::now();
            if (e > 0) stage_ms[s].push_back(std::chrono::duration<double, std::milli>(now - t).count());
            t = now;
            s++;
        };
        step(export_01(raw, 64, o1), "export_01", o1);
        step(export_02(o1, o2), "export_02", o2);
        step(export_03(o2, f[0]), "export_03", f[0]);
        step(export_04(f[0], 1.9f, 1.4f, f[1]), "export_04", f[1]);
        step(export_05(f[1], m, f[2]), "export_05", f[2]);
        step(export_06(f[2], 1.2f, f[3]), "export_06", f[3]);
        step(export_07(f[3], f[4]), "export_07", f[4]);
        step(export_08(f[4], f[5]), "export_08", f[5]);
        step(export_09(f[5], f[6]), "export_09", f[6]);
        step(export_10(f[6], 1.1f, f[0]), "export_10", f[0]);
        step(export_11(f[0], half), "export_11", half);
        step(export_12(half, u8), "export_12", u8);
        step(export_13(u8, float(w / 2), float(h / 2), out), "export_13", out);
        if (e > 0) export_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    unsigned long long sum = 0;
    out.for_each_value([&](uint8_t v) { sum = sum * 31 + v; });
    if (std::getenv("EXPORT_STAGE_SUMS")) {
        // Where two runtimes disagree: a sum of each kept output.
        double a = 0, b = 0, c = 0;
        o2.for_each_value([&](uint16_t v) { a += v; });
        f[6].for_each_value([&](float v) { b += v; });
        half.for_each_value([&](float v) { c += v; });
        std::fprintf(stderr, "export_02 %.6g export_09 %.6g export_11 %.6g\n", a, b, c);
    }
    std::printf("{\"width\": %d, \"height\": %d, \"exports\": %d, \"export_ms_median\": %.3f, \"export_ms_min\": %.3f, \"checksum\": \"%016llx\", \"stage_ms_median\": [",
                w, h, exports, median(export_ms), *std::min_element(export_ms.begin(), export_ms.end()), sum);
    for (int s = 0; s < 13; s++) std::printf("%s%.3f", s ? ", " : "", median(stage_ms[s]));
    std::printf("]}\n");
}

int main(int argc, char **argv) {
    const int w = argc > 2 ? std::atoi(argv[1]) : 6000;
    const int h = argc > 2 ? std::atoi(argv[2]) : 4000;
    const int exports = argc > 3 ? std::atoi(argv[3]) : 5;
    run(w, h, exports);
    halide_device_release(nullptr, halide_vulkan_device_interface());
    return 0;
}
