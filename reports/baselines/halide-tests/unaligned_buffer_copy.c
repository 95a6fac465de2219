/* The steps of cases/host_memory/unaligned_buffer_copy.yaml in C, against a
 * Halide Vulkan runtime library (a standalone runtime linked by
 * scripts/halide-runtime.sh), so that a lab machine without the suite or a
 * debugger can say where Halide 19.0.0 waits: run it with
 * scripts/backtrace-preload.c preloaded and send SIGUSR1 when it hangs.
 *
 *   cc -O1 -I<wheel>/include unaligned_buffer_copy.c -o unaligned_buffer_copy \
 *      target/halide/19.0.0/libhalide_runtime_vulkan.so -Wl,-rpath,'$ORIGIN'
 *
 * Each step prints its name and result before the next starts.
 */
#include <HalideRuntime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* HalideRuntimeVulkan.h is C++; this is its one entry point used here. */
extern const struct halide_device_interface_t *halide_vulkan_device_interface(void);

enum { W = 1500, H = 700 };

static void make(halide_buffer_t *b, halide_dimension_t *d, uint8_t *host) {
    memset(b, 0, sizeof *b);
    d[0] = (halide_dimension_t){0, W, 1, 0};
    d[1] = (halide_dimension_t){0, H, W, 0};
    b->host = host;
    b->type = (struct halide_type_t){halide_type_uint, 16, 1};
    b->dimensions = 2;
    b->dim = d;
}

/* Halide's default handler aborts; the steps report instead. */
static void on_error(void *user_context, const char *msg) {
    (void)user_context;
    printf("halide_error: %s", msg);
    fflush(stdout);
}

static int step(const char *what, int r) {
    printf("%s: %d\n", what, r);
    fflush(stdout);
    return r;
}

static int check(const halide_buffer_t *b, const char *what) {
    const uint16_t *p = (const uint16_t *)b->host;
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < W; x++) {
            int in = x >= 100 && x < 1300 && y >= 50 && y < 650;
            uint16_t want = in ? (uint16_t)(x + 7 * y) : 0;
            if (p[x + W * y] != want) {
                printf("%s: (%d, %d) = %u, expected %u\n", what, x, y, p[x + W * y], want);
                return 1;
            }
        }
    }
    printf("%s: right\n", what);
    return 0;
}

int main(void) {
    halide_set_error_handler(on_error);
    const struct halide_device_interface_t *vk = halide_vulkan_device_interface();
    size_t bytes = (size_t)W * H * 2;
    uint8_t *a = aligned_alloc(4096, bytes + 8192), *b = aligned_alloc(4096, bytes + 8192),
            *c = aligned_alloc(4096, bytes + 8192);
    memset(b, 0, bytes + 8192);
    memset(c, 0, bytes + 8192);
    halide_buffer_t src, dst, up, crop;
    halide_dimension_t ds[2], dd[2], du[2], dc[2];
    make(&src, ds, a + 4);
    make(&dst, dd, b + 4092);
    make(&up, du, c + 16);
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < W; x++) {
            ((uint16_t *)src.host)[x + W * y] = (uint16_t)(x + 7 * y);
        }
    }
    src.flags = halide_buffer_flag_host_dirty;
    if (step("halide_copy_to_device(src)", halide_copy_to_device(NULL, &src, vk))) return 1;
    crop = src;
    dc[0] = (halide_dimension_t){100, 1200, 1, 0};
    dc[1] = (halide_dimension_t){50, 600, W, 0};
    crop.dim = dc;
    crop.host = src.host + 2 * (100 + W * 50);
    crop.device = 0;
    crop.device_interface = NULL;
    if (step("halide_device_crop(src -> crop)", halide_device_crop(NULL, &src, &crop))) return 1;
    crop.flags = halide_buffer_flag_device_dirty;
    if (step("halide_buffer_copy(crop -> dst, host)", halide_buffer_copy(NULL, &crop, NULL, &dst))) return 1;
    if (check(&dst, "dst")) return 1;
    step("halide_device_release_crop(crop)", halide_device_release_crop(NULL, &crop));
    if (step("halide_buffer_copy(dst -> up, device)", halide_buffer_copy(NULL, &dst, vk, &up))) return 1;
    up.flags = halide_buffer_flag_device_dirty;
    if (step("halide_copy_to_host(up)", halide_copy_to_host(NULL, &up))) return 1;
    if (check(&up, "up")) return 1;
    halide_device_free(NULL, &up);
    halide_device_free(NULL, &src);
    halide_device_release(NULL, vk);
    printf("Success!\n");
    return 0;
}
