// vkcopy's library of Halide's Vulkan ABI in place of the Vulkan runtime
// module that libHalide links into programs it compiles JIT.
//
// libHalide keeps its runtime modules as bitcode; scripts/halide-runtime-module.sh
// compiles this file with the flags of Halide's own runtime and preloads it
// where libHalide's Vulkan module would be. Each entry point below forwards to
// the library (libvkcopy_halide_jit.so: vkcopy-halide and a generic Halide
// runtime of its own, built by scripts/halide-runtime.sh vkcopy-jit), which is
// opened on first use through the JIT's own halide_load_library. The
// signatures are those of HalideRuntimeVulkan.h; the module is freestanding,
// as Halide's runtime is, so nothing here includes libc's headers.
//
// VKCOPY_HALIDE_JIT_LIBRARY names the library (its path); without it the
// loader's search path is used.

#include <stddef.h>
#include <stdint.h>

struct halide_buffer_t;
struct halide_device_interface_t;
struct VkInstance_T;
struct VkDevice_T;
struct VkPhysicalDevice_T;
struct VkQueue_T;
struct VkAllocationCallbacks;

extern "C" {
void *halide_load_library(const char *name);
void *halide_get_library_symbol(void *lib, const char *name);
void halide_error(void *user_context, const char *msg);
void halide_print(void *user_context, const char *msg);
int halide_device_release(void *user_context, const struct halide_device_interface_t *device_interface);
char *getenv(const char *name);
struct halide_device_allocation_pool {
    int (*release_unused)(void *user_context);
    struct halide_device_allocation_pool *next;
};
void halide_register_device_allocation_pool(struct halide_device_allocation_pool *pool);
bool halide_can_reuse_device_allocations(void *user_context);
}

#define WEAK __attribute__((weak))

namespace {

void *lib = nullptr;

#ifdef DEBUG_RUNTIME
// In a debug pipeline the library says when it makes and frees its GPU
// objects, in the debug runtime's words, through halide_print: Halide's
// gpu_object_lifetime tests count them.
void trace_to_halide(const char *line) {
    halide_print(nullptr, line);
}

// Gives the library `print` (or none) as its printer of object lifetimes.
void set_trace(void *l, void (*print)(const char *)) {
    typedef void (*setter)(void (*)(const char *));
    setter f = (setter)halide_get_library_symbol(l, "vkcopy_halide_set_trace");
    if (f != nullptr) {
        f(print);
    }
}
#endif

// halide_reuse_device_allocations(false) in the program reaches the JIT's
// generic runtime, not the library's own: this pool hands the JIT's flag to
// the library's, whose pool (vkcopy's) then gives back what it keeps.
int release_unused(void *user_context) {
    void *l = __atomic_load_n(&lib, __ATOMIC_ACQUIRE);
    if (l == nullptr) {
        return 0;
    }
    typedef int (*setter)(void *, bool);
    setter f = (setter)halide_get_library_symbol(l, "halide_reuse_device_allocations");
    return f ? f(user_context, halide_can_reuse_device_allocations(user_context)) : 0;
}

struct halide_device_allocation_pool pool = {release_unused, nullptr};

// The library, opened once; a race opens it twice, which the loader counts.
void *library(void *user_context) {
    void *l = __atomic_load_n(&lib, __ATOMIC_ACQUIRE);
    if (l == nullptr) {
        const char *path = getenv("VKCOPY_HALIDE_JIT_LIBRARY");
        l = halide_load_library(path ? path : "libvkcopy_halide_jit.so");
        if (l == nullptr) {
            halide_error(user_context, "vkcopy's Vulkan bridge: cannot open its library (set VKCOPY_HALIDE_JIT_LIBRARY to libvkcopy_halide_jit.so)\n");
            return nullptr;
        }
#ifdef DEBUG_RUNTIME
        set_trace(l, trace_to_halide);
#endif
        if (__atomic_exchange_n(&lib, l, __ATOMIC_ACQ_REL) == nullptr) {
            halide_register_device_allocation_pool(&pool);
        }
    }
    return l;
}

// The library's definition of `name`, or null (said through halide_error).
template<typename F>
F lookup(void *user_context, const char *name) {
    void *l = library(user_context);
    if (l == nullptr) {
        return nullptr;
    }
    void *f = halide_get_library_symbol(l, name);
    if (f == nullptr) {
        halide_error(user_context, "vkcopy's Vulkan bridge: its library lacks an entry point\n");
    }
    return (F)f;
}

// -1 is halide_error_code_generic_error.
const int generic_error = -1;

}  // namespace

#define FORWARD(uc, name, type) \
    static type f = nullptr;    \
    if (f == nullptr) {         \
        f = lookup<type>(uc, #name); \
    }

extern "C" {

WEAK const struct halide_device_interface_t *halide_vulkan_device_interface() {
    typedef const struct halide_device_interface_t *(*fn)();
    FORWARD(nullptr, halide_vulkan_device_interface, fn);
    return f ? f() : nullptr;
}

WEAK int halide_vulkan_initialize_kernels(void *user_context, void **state_ptr, const char *src, int size) {
    typedef int (*fn)(void *, void **, const char *, int);
    FORWARD(user_context, halide_vulkan_initialize_kernels, fn);
    return f ? f(user_context, state_ptr, src, size) : generic_error;
}

WEAK void halide_vulkan_finalize_kernels(void *user_context, void *state_ptr) {
    typedef void (*fn)(void *, void *);
    FORWARD(user_context, halide_vulkan_finalize_kernels, fn);
    if (f) {
        f(user_context, state_ptr);
    }
}

WEAK int halide_vulkan_run(void *user_context, void *state_ptr, const char *entry_name,
                           int blocksX, int blocksY, int blocksZ,
                           int threadsX, int threadsY, int threadsZ,
                           int shared_mem_bytes, size_t arg_sizes[], void *args[],
                           int8_t arg_is_buffer[]) {
    typedef int (*fn)(void *, void *, const char *, int, int, int, int, int, int, int,
                      size_t *, void **, int8_t *);
    FORWARD(user_context, halide_vulkan_run, fn);
    return f ? f(user_context, state_ptr, entry_name, blocksX, blocksY, blocksZ,
                 threadsX, threadsY, threadsZ, shared_mem_bytes, arg_sizes, args, arg_is_buffer) :
               generic_error;
}

WEAK int halide_vulkan_wrap_vk_buffer(void *user_context, struct halide_buffer_t *buf, uint64_t vk_buffer) {
    typedef int (*fn)(void *, struct halide_buffer_t *, uint64_t);
    FORWARD(user_context, halide_vulkan_wrap_vk_buffer, fn);
    return f ? f(user_context, buf, vk_buffer) : generic_error;
}

WEAK int halide_vulkan_detach_vk_buffer(void *user_context, struct halide_buffer_t *buf) {
    typedef int (*fn)(void *, struct halide_buffer_t *);
    FORWARD(user_context, halide_vulkan_detach_vk_buffer, fn);
    return f ? f(user_context, buf) : generic_error;
}

WEAK uintptr_t halide_vulkan_get_vk_buffer(void *user_context, struct halide_buffer_t *buf) {
    typedef uintptr_t (*fn)(void *, struct halide_buffer_t *);
    FORWARD(user_context, halide_vulkan_get_vk_buffer, fn);
    return f ? f(user_context, buf) : 0;
}

// As Halide's own module does when the JIT lets it go: the context and what
// it caches are released (only if this module ever opened the library).
__attribute__((destructor)) WEAK void halide_vulkan_cleanup() {
    void *l = __atomic_load_n(&lib, __ATOMIC_ACQUIRE);
    if (l != nullptr) {
        halide_device_release(nullptr, halide_vulkan_device_interface());
#ifdef DEBUG_RUNTIME
        // The printer is this module's code, which goes with it.
        set_trace(l, nullptr);
#endif
    }
}

}  // extern "C"
