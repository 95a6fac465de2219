// An application that shares its own Vulkan instance, device and queue with
// Halide, the way Halide lets it: by defining halide_vulkan_acquire_context
// and halide_vulkan_release_context itself. Runs gain_f32 of pipelines.py on
// vkcopy's library over that device, compares it with the CPU, then destroys
// its device itself. Prints one line; exits non-zero on any failure.
//
// The few Vulkan declarations it needs are written here, so that it builds
// without the Vulkan headers.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>

#include "HalideBuffer.h"
#include "HalideRuntimeVulkan.h"

#include "gain_f32_cpu.h"
#include "gain_f32_gpu.h"

namespace vk {
struct ApplicationInfo {
    int32_t sType = 0;
    const void *pNext = nullptr;
    const char *pApplicationName = "app_context";
    uint32_t applicationVersion = 0;
    const char *pEngineName = nullptr;
    uint32_t engineVersion = 0;
    uint32_t apiVersion = (1u << 22) | (2u << 12);  // 1.2
};
struct InstanceCreateInfo {
    int32_t sType = 1;
    const void *pNext = nullptr;
    uint32_t flags = 0;
    const ApplicationInfo *pApplicationInfo = nullptr;
    uint32_t enabledLayerCount = 0;
    const char *const *ppEnabledLayerNames = nullptr;
    uint32_t enabledExtensionCount = 0;
    const char *const *ppEnabledExtensionNames = nullptr;
};
struct DeviceQueueCreateInfo {
    int32_t sType = 2;
    const void *pNext = nullptr;
    uint32_t flags = 0;
    uint32_t queueFamilyIndex = 0;
    uint32_t queueCount = 1;
    const float *pQueuePriorities = nullptr;
};
struct TimelineSemaphoreFeatures {
    int32_t sType = 1000207000;
    void *pNext = nullptr;
    uint32_t timelineSemaphore = 1;
};
struct DeviceCreateInfo {
    int32_t sType = 3;
    const void *pNext = nullptr;
    uint32_t flags = 0;
    uint32_t queueCreateInfoCount = 1;
    const DeviceQueueCreateInfo *pQueueCreateInfos = nullptr;
    uint32_t enabledLayerCount = 0;
    const char *const *ppEnabledLayerNames = nullptr;
    uint32_t enabledExtensionCount = 0;
    const char *const *ppEnabledExtensionNames = nullptr;
    const void *pEnabledFeatures = nullptr;
};
struct QueueFamilyProperties {
    uint32_t queueFlags, queueCount, timestampValidBits, granularity[3];
};
}  // namespace vk

using Fn = void (*)();
static void *instance, *physical, *device, *queue;
static uint32_t family;
static int acquired;

static Fn get(void *lib, void *inst, const char *name) {
    auto gipa = (Fn(*)(void *, const char *))dlsym(lib, "vkGetInstanceProcAddr");
    return gipa(inst, name);
}

static bool make_device() {
    void *lib = dlopen("libvulkan.so.1", RTLD_NOW);
    if (!lib) return false;
    vk::ApplicationInfo app;
    vk::InstanceCreateInfo ici;
    ici.pApplicationInfo = &app;
    auto create_instance = (int (*)(const void *, const void *, void **))get(lib, nullptr, "vkCreateInstance");
    if (create_instance(&ici, nullptr, &instance) != 0) return false;
    auto enumerate = (int (*)(void *, uint32_t *, void **))get(lib, instance, "vkEnumeratePhysicalDevices");
    uint32_t n = 1;
    if (enumerate(instance, &n, &physical) < 0 || n == 0) return false;
    auto families = (void (*)(void *, uint32_t *, vk::QueueFamilyProperties *))get(lib, instance, "vkGetPhysicalDeviceQueueFamilyProperties");
    vk::QueueFamilyProperties props[16];
    uint32_t count = 16;
    families(physical, &count, props);
    for (family = 0; family < count && !(props[family].queueFlags & 2); family++) {}  // COMPUTE
    if (family == count) return false;
    float priority = 1.0f;
    vk::DeviceQueueCreateInfo qci;
    qci.queueFamilyIndex = family;
    qci.pQueuePriorities = &priority;
    vk::TimelineSemaphoreFeatures timeline;
    vk::DeviceCreateInfo dci;
    dci.pNext = &timeline;
    dci.pQueueCreateInfos = &qci;
    auto create_device = (int (*)(void *, const void *, const void *, void **))get(lib, instance, "vkCreateDevice");
    if (create_device(physical, &dci, nullptr, &device) != 0) return false;
    auto get_queue = (void (*)(void *, uint32_t, uint32_t, void **))get(lib, instance, "vkGetDeviceQueue");
    get_queue(device, family, 0, &queue);
    return true;
}

static void destroy_device() {
    void *lib = dlopen("libvulkan.so.1", RTLD_NOW);
    ((void (*)(void *, const void *))get(lib, instance, "vkDestroyDevice"))(device, nullptr);
    ((void (*)(void *, const void *))get(lib, instance, "vkDestroyInstance"))(instance, nullptr);
}

// The application's hooks, which replace the library's.
extern "C" int halide_vulkan_acquire_context(void *, struct halide_vulkan_memory_allocator **allocator,
                                             VkInstance *inst, VkDevice *dev, VkPhysicalDevice *phys,
                                             VkQueue *q, uint32_t *fam, VkDebugUtilsMessengerEXT *messenger,
                                             bool) {
    acquired++;
    *allocator = nullptr;
    *inst = (VkInstance)instance;
    *dev = (VkDevice)device;
    *phys = (VkPhysicalDevice)physical;
    *q = (VkQueue)queue;
    *fam = family;
    *messenger = (VkDebugUtilsMessengerEXT) nullptr;
    return 0;
}

extern "C" int halide_vulkan_release_context(void *, VkInstance, VkDevice, VkQueue, VkDebugUtilsMessengerEXT) {
    return 0;
}

int main() {
    if (!make_device()) {
        std::printf("FAIL  app_context: cannot make the application's Vulkan device\n");
        return 1;
    }
    long bad = 0;
    {
        Halide::Runtime::Buffer<float> in(3000), gpu(3000), cpu(3000);
        in.for_each_element([&](int i) { in(i) = 0.5f * float(i % 101) - 9.0f; });
        in.set_host_dirty();
        int r = gain_f32_gpu(in, 2.5f, 3, gpu) | gpu.copy_to_host() | gain_f32_cpu(in, 2.5f, 3, cpu);
        if (r != 0) {
            std::printf("FAIL  app_context: a call returned %d\n", r);
            return 1;
        }
        cpu.for_each_element([&](int i) { bad += gpu(i) != cpu(i); });
    }
    halide_device_release(nullptr, halide_vulkan_device_interface());
    // The device is the application's still: it goes now, after the library let go.
    destroy_device();
    if (bad || acquired == 0) {
        std::printf("FAIL  app_context: %ld of 3000 elements differ; the hook was called %d times\n", bad, acquired);
        return 1;
    }
    std::printf("pass  app_context\n");
    return 0;
}
