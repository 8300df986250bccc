/*
 * Exact buffer sizes for the accuracy oracle.
 *
 * llama.cpp logs each buffer it allocates in MiB with two decimals. Preloaded
 * into a process that loads a model, this library wraps the two functions those
 * log lines call and keeps the last value each returned, so that a log callback
 * can read the exact byte count behind the line it is handed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

size_t vramchat_last_buffer_size = 0;
size_t vramchat_last_sched_size = 0;

/* libggml-base is opened by ctypes with RTLD_LOCAL, so RTLD_NEXT cannot see it:
 * look the real function up in the already loaded library instead. */
static void * real_symbol(const char * name) {
    void * sym = dlsym(RTLD_NEXT, name);
    if (sym) {
        return sym;
    }
    const char * libs[] = { "libggml-base.so.0", "libggml-base.so", "libggml.so" };
    for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
        void * handle = dlopen(libs[i], RTLD_NOW | RTLD_NOLOAD);
        if (handle) {
            sym = dlsym(handle, name);
            if (sym) {
                return sym;
            }
        }
    }
    return NULL;
}

size_t ggml_backend_buffer_get_size(void * buffer) {
    static size_t (*real)(void *) = NULL;
    if (!real) {
        real = (size_t (*)(void *)) real_symbol("ggml_backend_buffer_get_size");
    }
    size_t size = real(buffer);
    vramchat_last_buffer_size = size;
    return size;
}

size_t ggml_backend_sched_get_buffer_size(void * sched, void * backend) {
    static size_t (*real)(void *, void *) = NULL;
    if (!real) {
        real = (size_t (*)(void *, void *)) real_symbol("ggml_backend_sched_get_buffer_size");
    }
    size_t size = real(sched, backend);
    vramchat_last_sched_size = size;
    return size;
}
