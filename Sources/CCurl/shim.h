#ifndef BOOKCACHE_CCURL_SHIM_H
#define BOOKCACHE_CCURL_SHIM_H
#include <curl/curl.h>

/* curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: one wrapper per
   argument type. */
typedef size_t (*bc_curl_data_callback)(char *data, size_t size, size_t count, void *user);

static inline CURLcode bc_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode bc_setopt_off(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode bc_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode bc_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode bc_setopt_list(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode bc_setopt_callback(CURL *handle, CURLoption option, bc_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}
static inline long bc_getinfo_long(CURL *handle, CURLINFO info) {
    long value = 0;
    curl_easy_getinfo(handle, info, &value);
    return value;
}
static inline const char *bc_getinfo_string(CURL *handle, CURLINFO info) {
    char *value = NULL;
    curl_easy_getinfo(handle, info, &value);
    return value;
}
static inline CURLMcode bc_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}
static inline CURLcode bc_message_result(CURLMsg *message) { return message->data.result; }
static inline size_t bc_write_pause(void) { return CURL_WRITEFUNC_PAUSE; }
#endif
