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

/*
 * Vision projectors (libmtmd): clip.cpp allocates its weights with
 * ggml_backend_alloc_ctx_tensors_from_buft and logs no size for that buffer, and
 * its compute buffer belongs to a scheduler of its own. Keep the size of every
 * buffer that function returns (summed since the last reset) and the last
 * scheduler created, so that the measuring process can ask for its buffers after
 * mtmd_init_from_file (warmup) or after an image was encoded.
 */
size_t vramchat_ctx_alloc_total = 0;
static void * vramchat_last_sched = NULL;

void * ggml_backend_alloc_ctx_tensors_from_buft(void * ctx, void * buft) {
    static void * (*real)(void *, void *) = NULL;
    static size_t (*size_of)(void *) = NULL;
    if (!real) {
        real = (void * (*)(void *, void *)) real_symbol("ggml_backend_alloc_ctx_tensors_from_buft");
        size_of = (size_t (*)(void *)) real_symbol("ggml_backend_buffer_get_size");
    }
    void * buffer = real(ctx, buft);
    if (buffer) {
        vramchat_ctx_alloc_total += size_of(buffer);
    }
    return buffer;
}

void * ggml_backend_sched_new(void ** backends, void ** bufts, int n_backends, size_t graph_size, _Bool parallel,
                              _Bool op_offload) {
    static void * (*real)(void **, void **, int, size_t, _Bool, _Bool) = NULL;
    if (!real) {
        real = (void * (*)(void **, void **, int, size_t, _Bool, _Bool)) real_symbol("ggml_backend_sched_new");
    }
    void * sched = real(backends, bufts, n_backends, graph_size, parallel, op_offload);
    vramchat_last_sched = sched;
    return sched;
}

/* the compute buffer size of backend i (in priority order) of the last scheduler created; 0 past the last */
size_t vramchat_last_sched_buffer(int i) {
    static int (*n_backends)(void *) = NULL;
    static void * (*get_backend)(void *, int) = NULL;
    static size_t (*get_size)(void *, void *) = NULL;
    if (!vramchat_last_sched) {
        return 0;
    }
    if (!n_backends) {
        n_backends = (int (*)(void *)) real_symbol("ggml_backend_sched_get_n_backends");
        get_backend = (void * (*)(void *, int)) real_symbol("ggml_backend_sched_get_backend");
        get_size = (size_t (*)(void *, void *)) real_symbol("ggml_backend_sched_get_buffer_size");
    }
    if (i < 0 || i >= n_backends(vramchat_last_sched)) {
        return 0;
    }
    return get_size(vramchat_last_sched, get_backend(vramchat_last_sched, i));
}
