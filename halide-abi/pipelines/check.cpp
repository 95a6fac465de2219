// Runs each pipeline of pipelines.py on the Vulkan runtime this program is
// linked with and on the CPU, and compares the outputs element by element.
// `check NAME...` runs the named checks (all without arguments); it prints
// one line per check and exits non-zero if any differs or fails.
//
// Around the pipelines it uses the device interface as applications do:
// inputs uploaded, then cropped or sliced on the device (Buffer::cropped and
// sliced call halide_device_crop and halide_device_slice), and outputs moved
// between device buffers with halide_buffer_copy.

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "HalideBuffer.h"
#include "HalideRuntimeVulkan.h"

#include "async_frames_cpu.h"
#include "async_frames_gpu.h"
#include "blur_u16_cpu.h"
#include "blur_u16_gpu.h"
#include "gain_f32_cpu.h"
#include "gain_f32_gpu.h"
#include "mix_f64_cpu.h"
#include "mix_f64_gpu.h"
#include "tile_sum_i8_cpu.h"
#include "tile_sum_i8_gpu.h"
#include "volume_i64_cpu.h"
#include "volume_i64_gpu.h"

using Halide::Runtime::Buffer;

namespace {

const halide_device_interface_t *vulkan() { return halide_vulkan_device_interface(); }

std::string failure;

bool ok(int code, const char *what) {
    if (code != 0) {
        failure = std::string(what) + " returned " + std::to_string(code);
        return false;
    }
    return true;
}

// Equal element by element (floats to a few ulps: the GPU may fuse).
template <typename T>
bool same(Buffer<T> gpu, Buffer<T> cpu) {
    if (!ok(gpu.copy_to_host(), "copy_to_host")) return false;
    long bad = 0;
    std::string first;
    cpu.for_each_element([&](const int *pos) {
        T a = gpu(pos), b = cpu(pos);
        bool eq = a == b;
        if (!eq && std::is_floating_point<T>::value) {
            eq = std::fabs(double(a) - double(b)) <= 1e-5 * (1.0 + std::fabs(double(b)));
        }
        if (!eq && bad++ == 0) {
            first = "first at (";
            for (int d = 0; d < cpu.dimensions(); d++) first += (d ? ", " : "") + std::to_string(pos[d]);
            first += "): " + std::to_string(double(a)) + " on the device, " + std::to_string(double(b)) + " on the CPU";
        }
    });
    if (bad) failure = std::to_string(bad) + " of " + std::to_string(cpu.number_of_elements()) + " elements differ; " + first;
    return bad == 0;
}

template <typename T>
Buffer<T> pattern(std::vector<int> sizes, int seed) {
    Buffer<T> b(sizes);
    uint32_t s = 2654435761u * uint32_t(seed + 1);
    b.for_each_value([&](T &v) {
        s = s * 1664525u + 1013904223u;
        v = T(s >> 9);
    });
    // Written through references: tell Halide the host holds the data.
    b.set_host_dirty();
    return b;
}

// blur_u16 on a device crop of an uploaded image (min 10, 20; not at 0).
bool blur_of_crop() {
    auto img = pattern<uint16_t>({300, 200}, 1);
    if (!ok(img.copy_to_device(vulkan()), "copy_to_device")) return false;
    auto crop = img.cropped({{10, 256}, {20, 160}});
    Buffer<uint16_t> gpu(256, 160), cpu(256, 160);
    gpu.set_min(10, 20);
    cpu.set_min(10, 20);
    if (!ok(blur_u16_gpu(crop, gpu), "blur_u16_gpu")) return false;
    if (!ok(blur_u16_cpu(img.cropped({{10, 256}, {20, 160}}), cpu), "blur_u16_cpu")) return false;
    return same(gpu, cpu);
}

// blur_u16 on a device slice of a 3-D buffer.
bool blur_of_slice() {
    auto vol = pattern<uint16_t>({128, 96, 3}, 2);
    if (!ok(vol.copy_to_device(vulkan()), "copy_to_device")) return false;
    Buffer<uint16_t> gpu(128, 96), cpu(128, 96);
    if (!ok(blur_u16_gpu(vol.sliced(2, 1), gpu), "blur_u16_gpu")) return false;
    if (!ok(blur_u16_cpu(vol.sliced(2, 1), cpu), "blur_u16_cpu")) return false;
    return same(gpu, cpu);
}

bool tile_sum() {
    auto in = pattern<int8_t>({200, 120}, 3);
    Buffer<int32_t> gpu(200, 120), cpu(200, 120);
    if (!ok(tile_sum_i8_gpu(in, gpu), "tile_sum_i8_gpu")) return false;
    if (!ok(tile_sum_i8_cpu(in, cpu), "tile_sum_i8_cpu")) return false;
    return same(gpu, cpu);
}

bool volume() {
    auto in = pattern<int64_t>({40, 24, 12}, 4);
    Buffer<int64_t> gpu(40, 24, 12), cpu(40, 24, 12);
    if (!ok(volume_i64_gpu(in, gpu), "volume_i64_gpu")) return false;
    if (!ok(volume_i64_cpu(in, cpu), "volume_i64_cpu")) return false;
    return same(gpu, cpu);
}

// gain_f32 with scalars, its output moved to another device buffer with
// halide_buffer_copy before it is read.
bool gain_then_buffer_copy() {
    Buffer<float> in(5000);
    in.for_each_element([&](int i) { in(i) = 0.25f * float(i % 977) - 40.0f; });
    in.set_host_dirty();
    Buffer<float> out(5000), moved(5000), cpu(5000);
    if (!ok(gain_f32_gpu(in, 1.5f, -7, out), "gain_f32_gpu")) return false;
    if (!ok(moved.device_malloc(vulkan()), "device_malloc")) return false;
    if (!ok(halide_buffer_copy(nullptr, out.raw_buffer(), vulkan(), moved.raw_buffer()), "halide_buffer_copy")) return false;
    if (!ok(gain_f32_cpu(in, 1.5f, -7, cpu), "gain_f32_cpu")) return false;
    return same(moved, cpu);
}

bool mix() {
    auto in = pattern<uint16_t>({96, 64}, 5);
    Buffer<double> gpu(96, 64), cpu(96, 64);
    if (!ok(mix_f64_gpu(in, gpu), "mix_f64_gpu")) return false;
    if (!ok(mix_f64_cpu(in, cpu), "mix_f64_cpu")) return false;
    return same(gpu, cpu);
}

bool async_copy() {
    auto in = pattern<int32_t>({64, 48}, 6);
    in.for_each_value([](int32_t &v) { v &= 0xffff; });
    in.set_host_dirty();
    Buffer<int32_t> gpu(64, 48), cpu(64, 48);
    if (!ok(async_frames_gpu(in, gpu), "async_frames_gpu")) return false;
    if (!ok(async_frames_cpu(in, cpu), "async_frames_cpu")) return false;
    return same(gpu, cpu);
}

struct Check {
    const char *name;
    bool (*run)();
};

const Check checks[] = {
    {"blur_of_crop", blur_of_crop},
    {"blur_of_slice", blur_of_slice},
    {"tile_sum", tile_sum},
    {"volume", volume},
    {"gain_then_buffer_copy", gain_then_buffer_copy},
    {"mix", mix},
    {"async_copy", async_copy},
};

std::string errors;

extern "C" void on_error(void *, const char *msg) { errors += msg; }

}  // namespace

int main(int argc, char **argv) {
    halide_set_error_handler(on_error);
    int failed = 0;
    for (const Check &c : checks) {
        bool wanted = argc == 1;
        for (int i = 1; i < argc; i++) wanted |= std::strcmp(argv[i], c.name) == 0;
        if (!wanted) continue;
        failure.clear();
        errors.clear();
        bool pass = c.run();
        // Buffers are gone: the device must hold nothing of the check's.
        halide_device_release(nullptr, vulkan());
        if (pass) {
            std::printf("pass  %s\n", c.name);
        } else {
            failed++;
            std::printf("FAIL  %s: %s%s%s\n", c.name, failure.c_str(), errors.empty() ? "" : "; halide_error: ", errors.c_str());
        }
    }
    return failed ? 1 : 0;
}
