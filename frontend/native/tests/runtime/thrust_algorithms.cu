// thrust on device_vectors, each result checked against the CPU: sort (ints, floats, descending),
// sort_by_key, stable_sort_by_key, inclusive and exclusive scans, reduce, transform_reduce, count_if,
// copy_if, unique, sequence and transform (bulk copies into shared memory on sm_90), and the same sort
// on a stream of the program's own with thrust::cuda::par_nosync (temporary storage from
// cudaMallocAsync, as thrust takes it). Sizes keep the emulated device's run short and still span
// several tiles.
#include "common.cuh"

#include <thrust/copy.h>
#include <thrust/count.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/host_vector.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>
#include <thrust/unique.h>

#include <algorithm>
#include <functional>
#include <vector>

template <typename T>
static void same(const char *what, const thrust::device_vector<T> &d, const std::vector<T> &want) {
    thrust::host_vector<T> got = d;
    if (got.size() != want.size()) {
        FAIL("%s: %zu elements, expected %zu", what, (size_t) got.size(), want.size());
    }
    for (size_t i = 0; i < want.size(); i++) {
        if (!(got[i] == want[i])) {
            FAIL("%s: element %zu differs", what, i);
        }
    }
    printf("%s: %zu elements equal the CPU's, checksum %016llx\n", what, want.size(),
           (unsigned long long) fnv1a(want.data(), want.size() * sizeof(T)));
}

struct Square {
    __host__ __device__ long long operator()(int x) const { return (long long) x * x; }
};

struct Positive {
    __host__ __device__ bool operator()(int x) const { return x > 0; }
};

int main() {
    uint64_t seed = 2026;
    const int n = 5000;
    std::vector<int> h(n);
    std::vector<float> f(n);
    std::vector<unsigned int> vals(n);
    for (int i = 0; i < n; i++) {
        h[i] = (int) (splitmix64(&seed) % 20001) - 10000;
        f[i] = (float) ((int) (splitmix64(&seed) % 4001) - 2000) / 8.0f;
        vals[i] = (unsigned int) i;
    }

    {
        thrust::device_vector<int> d(h.begin(), h.end());
        thrust::sort(d.begin(), d.end());
        std::vector<int> want = h;
        std::sort(want.begin(), want.end());
        same("thrust::sort int", d, want);
        thrust::device_vector<int> g(h.begin(), h.end());
        thrust::sort(g.begin(), g.end(), thrust::greater<int>());
        std::sort(want.begin(), want.end(), std::greater<int>());
        same("thrust::sort int descending", g, want);
    }
    {
        thrust::device_vector<float> d(f.begin(), f.end());
        thrust::sort(d.begin(), d.end());
        std::vector<float> want = f;
        std::sort(want.begin(), want.end());
        same("thrust::sort float", d, want);
    }
    {
        thrust::device_vector<int> k(h.begin(), h.end());
        thrust::device_vector<unsigned int> v(vals.begin(), vals.end());
        thrust::stable_sort_by_key(k.begin(), k.end(), v.begin());
        std::vector<std::pair<int, unsigned int>> ref(n);
        for (int i = 0; i < n; i++) {
            ref[i] = {h[i] % 100, vals[i]};
        }
        // keys with many equal values: the values show stability
        std::vector<int> hk2(n);
        for (int i = 0; i < n; i++) {
            hk2[i] = ref[i].first;
        }
        thrust::device_vector<int> k2(hk2.begin(), hk2.end());
        thrust::device_vector<unsigned int> v2(vals.begin(), vals.end());
        thrust::stable_sort_by_key(k2.begin(), k2.end(), v2.begin());
        std::stable_sort(ref.begin(), ref.end(), [](auto a, auto b) { return a.first < b.first; });
        std::vector<int> wk(n);
        std::vector<unsigned int> wv(n);
        for (int i = 0; i < n; i++) {
            wk[i] = ref[i].first;
            wv[i] = ref[i].second;
        }
        same("thrust::stable_sort_by_key keys", k2, wk);
        same("thrust::stable_sort_by_key values", v2, wv);
        thrust::device_vector<unsigned int> v3(vals.begin(), vals.end());
        thrust::device_vector<float> k3(f.begin(), f.end());
        thrust::sort_by_key(k3.begin(), k3.end(), v3.begin());
        thrust::host_vector<float> gk = k3;
        thrust::host_vector<unsigned int> gv = v3;
        for (int i = 0; i < n; i++) {
            if (f[gv[i]] != gk[i] || (i > 0 && gk[i - 1] > gk[i])) {
                FAIL("thrust::sort_by_key: element %d is out of order or not its key's", i);
            }
        }
        std::vector<float> wf = f;
        std::sort(wf.begin(), wf.end());
        same("thrust::sort_by_key float keys", k3, wf);
    }
    {
        thrust::device_vector<int> d(h.begin(), h.end());
        thrust::device_vector<int> o(n);
        thrust::inclusive_scan(d.begin(), d.end(), o.begin());
        std::vector<int> want(n);
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += h[i];
            want[i] = s;
        }
        same("thrust::inclusive_scan", o, want);
        thrust::exclusive_scan(d.begin(), d.end(), o.begin(), 7);
        s = 7;
        for (int i = 0; i < n; i++) {
            want[i] = s;
            s += h[i];
        }
        same("thrust::exclusive_scan init 7", o, want);
        long long sum = thrust::reduce(d.begin(), d.end(), 0LL);
        long long wsum = 0, wsq = 0;
        for (int x : h) {
            wsum += x;
            wsq += (long long) x * x;
        }
        long long sq = thrust::transform_reduce(d.begin(), d.end(), Square(), 0LL, thrust::plus<long long>());
        int mx = thrust::reduce(d.begin(), d.end(), -100000, thrust::maximum<int>());
        if (sum != wsum || sq != wsq || mx != *std::max_element(h.begin(), h.end())) {
            FAIL("thrust::reduce: %lld %lld %d", sum, sq, mx);
        }
        printf("thrust::reduce %lld, transform_reduce %lld, max %d: equal the CPU's\n", sum, sq, mx);
        long positives = (long) thrust::count_if(d.begin(), d.end(), Positive());
        std::vector<int> want_pos;
        for (int x : h) {
            if (x > 0) {
                want_pos.push_back(x);
            }
        }
        thrust::device_vector<int> sel(n);
        auto end = thrust::copy_if(d.begin(), d.end(), sel.begin(), Positive());
        sel.resize(end - sel.begin());
        if (positives != (long) want_pos.size()) {
            FAIL("thrust::count_if: %ld, expected %zu", positives, want_pos.size());
        }
        same("thrust::copy_if", sel, want_pos);
        std::vector<int> wu(n);
        for (int i = 0; i < n; i++) {
            wu[i] = h[i] / 2000;
        }
        thrust::device_vector<int> u(wu.begin(), wu.end());
        thrust::sort(u.begin(), u.end());
        u.resize(thrust::unique(u.begin(), u.end()) - u.begin());
        std::sort(wu.begin(), wu.end());
        wu.resize(std::unique(wu.begin(), wu.end()) - wu.begin());
        same("thrust::unique", u, wu);
    }
    {
        // on sm_90 CUB's transform copies its tiles in with bulk copies completing an mbarrier
        thrust::device_vector<int> a(h.begin(), h.end());
        thrust::device_vector<int> b(n);
        thrust::sequence(b.begin(), b.end(), 3);
        thrust::device_vector<int> c(n);
        thrust::transform(a.begin(), a.end(), b.begin(), c.begin(), thrust::plus<int>());
        std::vector<int> want(n);
        for (int i = 0; i < n; i++) {
            want[i] = h[i] + 3 + i;
        }
        same("thrust::sequence and thrust::transform", c, want);
    }
    {
        cudaStream_t s;
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        thrust::device_vector<int> d(h.begin(), h.end());
        thrust::sort(thrust::cuda::par_nosync.on(s), d.begin(), d.end());
        CK(cudaStreamSynchronize(s));
        std::vector<int> want = h;
        std::sort(want.begin(), want.end());
        same("thrust::sort par_nosync on a stream", d, want);
        CK(cudaStreamDestroy(s));
    }
    printf("PASS\n");
    return 0;
}
