// CUB's device-wide algorithms through the runtime API, each checked against a CPU reference: radix
// sort (pairs, keys descending, a bit range), inclusive and exclusive sums, reductions (sum, max,
// arg-min), an even histogram, select with a predicate and with flags, run-length encoding and a
// segmented reduction; then block- and warp-level primitives (BlockScan, BlockReduce, WarpReduce,
// BlockRadixSort) in kernels of our own, whose function-scope __shared__ temporary storage is how
// CUB declares it. Temporary storage is stream-ordered (cudaMallocAsync/cudaFreeAsync) on a stream
// of the program's own. Sizes keep the emulated device's run short and still span several tiles.
#include "common.cuh"

#include <cub/cub.cuh>

#include <algorithm>
#include <vector>

static cudaStream_t stream;

// Runs a CUB device algorithm the documented way: a size query, stream-ordered temporary storage, the run.
template <typename F>
static void with_temp(const char *what, F run) {
    size_t bytes = 0;
    CK(run(nullptr, bytes));
    void *temp = nullptr;
    CK(cudaMallocAsync(&temp, bytes > 0 ? bytes : 1, stream));
    CK(run(temp, bytes));
    CK(cudaFreeAsync(temp, stream));
    CK(cudaStreamSynchronize(stream));
    (void) what;
}

template <typename T>
static T *upload(const std::vector<T> &h) {
    T *d;
    CK(cudaMalloc(&d, h.size() * sizeof(T) + 1));
    CK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

template <typename T>
static std::vector<T> download(const T *d, size_t n) {
    std::vector<T> h(n);
    if (n > 0) {
        CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    }
    return h;
}

template <typename T>
static void same(const char *what, const std::vector<T> &got, const std::vector<T> &want) {
    if (got.size() != want.size()) {
        FAIL("%s: %zu elements, expected %zu", what, got.size(), want.size());
    }
    for (size_t i = 0; i < got.size(); i++) {
        if (!(got[i] == want[i])) {
            FAIL("%s: element %zu differs", what, i);
        }
    }
    printf("%s: %zu elements equal the CPU's, checksum %016llx\n", what, got.size(),
           (unsigned long long) fnv1a(got.data(), got.size() * sizeof(T)));
}

struct Even {
    __host__ __device__ bool operator()(const int &x) const { return (x & 1) == 0; }
};

// Block-level primitives: each block scans, reduces and sorts its 128 x 4 items.
constexpr int BLOCK = 128;
constexpr int ITEMS = 4;

__global__ void block_primitives(const int *in, int *scanned, int *sums, int *sorted, int *warp_sums) {
    using Scan = cub::BlockScan<int, BLOCK>;
    using Reduce = cub::BlockReduce<int, BLOCK>;
    using Sort = cub::BlockRadixSort<int, BLOCK, ITEMS>;
    using Warp = cub::WarpReduce<int>;
    __shared__ union {
        typename Scan::TempStorage scan;
        typename Reduce::TempStorage reduce;
        typename Sort::TempStorage sort;
    } temp;
    __shared__ typename Warp::TempStorage warp[BLOCK / 32];
    int items[ITEMS];
    int base = blockIdx.x * BLOCK * ITEMS;
    for (int k = 0; k < ITEMS; k++) {
        items[k] = in[base + threadIdx.x * ITEMS + k];
    }
    int total = Reduce(temp.reduce).Sum(items);
    __syncthreads();
    int aggregate;
    int out[ITEMS];
    Scan(temp.scan).ExclusiveSum(items, out, aggregate);
    for (int k = 0; k < ITEMS; k++) {
        scanned[base + threadIdx.x * ITEMS + k] = out[k];
    }
    __syncthreads();
    int w = Warp(warp[threadIdx.x / 32]).Sum(items[0]);
    if (threadIdx.x % 32 == 0) {
        warp_sums[blockIdx.x * (BLOCK / 32) + threadIdx.x / 32] = w;
    }
    Sort(temp.sort).Sort(items);
    for (int k = 0; k < ITEMS; k++) {
        sorted[base + threadIdx.x * ITEMS + k] = items[k];
    }
    if (threadIdx.x == 0) {
        sums[blockIdx.x] = total == aggregate ? total : -1;
    }
}

int main() {
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    uint64_t seed = 21;
    const int n = 6000;

    // radix sort: pairs (u32 keys, their index as values), stable
    std::vector<unsigned int> keys(n);
    std::vector<unsigned int> vals(n);
    for (int i = 0; i < n; i++) {
        keys[i] = (unsigned int) splitmix64(&seed) % 50000u;
        vals[i] = (unsigned int) i;
    }
    {
        unsigned int *dk = upload(keys), *dv = upload(vals), *ok, *ov;
        CK(cudaMalloc(&ok, n * sizeof(unsigned int)));
        CK(cudaMalloc(&ov, n * sizeof(unsigned int)));
        with_temp("SortPairs", [&](void *t, size_t &b) {
            return cub::DeviceRadixSort::SortPairs(t, b, dk, ok, dv, ov, n, 0, 32, stream);
        });
        std::vector<std::pair<unsigned int, unsigned int>> ref(n);
        for (int i = 0; i < n; i++) {
            ref[i] = {keys[i], vals[i]};
        }
        std::stable_sort(ref.begin(), ref.end(), [](auto a, auto b) { return a.first < b.first; });
        std::vector<unsigned int> rk(n), rv(n);
        for (int i = 0; i < n; i++) {
            rk[i] = ref[i].first;
            rv[i] = ref[i].second;
        }
        same("DeviceRadixSort::SortPairs keys", download(ok, n), rk);
        same("DeviceRadixSort::SortPairs values", download(ov, n), rv);
        // keys descending, 64-bit
        std::vector<unsigned long long> k64(n);
        for (int i = 0; i < n; i++) {
            k64[i] = splitmix64(&seed);
        }
        unsigned long long *dk64 = upload(k64), *ok64;
        CK(cudaMalloc(&ok64, n * sizeof(unsigned long long)));
        with_temp("SortKeysDescending", [&](void *t, size_t &b) {
            return cub::DeviceRadixSort::SortKeysDescending(t, b, dk64, ok64, n, 0, 64, stream);
        });
        std::vector<unsigned long long> r64 = k64;
        std::sort(r64.begin(), r64.end(), [](auto a, auto b) { return a > b; });
        same("DeviceRadixSort::SortKeysDescending u64", download(ok64, n), r64);
        // signed keys sorted on bits [4, 20) only: stable among equal bit ranges
        std::vector<int> sk(n);
        for (int i = 0; i < n; i++) {
            sk[i] = (int) (splitmix64(&seed) & 0xffffff) - 0x800000;
        }
        int *dsk = upload(sk), *osk;
        CK(cudaMalloc(&osk, n * sizeof(int)));
        with_temp("SortKeys bits", [&](void *t, size_t &b) {
            return cub::DeviceRadixSort::SortKeys(t, b, (unsigned int *) dsk, (unsigned int *) osk, n, 4, 20, stream);
        });
        std::vector<int> rsk = sk;
        std::stable_sort(rsk.begin(), rsk.end(),
                         [](int a, int b) { return (((unsigned) a >> 4) & 0xffff) < (((unsigned) b >> 4) & 0xffff); });
        same("DeviceRadixSort::SortKeys bits 4..20", download(osk, n), rsk);
        CK(cudaFree(dk));
        CK(cudaFree(dv));
        CK(cudaFree(ok));
        CK(cudaFree(ov));
        CK(cudaFree(dk64));
        CK(cudaFree(ok64));
        CK(cudaFree(dsk));
        CK(cudaFree(osk));
    }

    // scans and reductions of ints
    std::vector<int> v(n);
    for (int i = 0; i < n; i++) {
        v[i] = (int) (splitmix64(&seed) % 2001) - 1000;
    }
    int *dv = upload(v), *out;
    CK(cudaMalloc(&out, n * sizeof(int)));
    {
        with_temp("InclusiveSum", [&](void *t, size_t &b) { return cub::DeviceScan::InclusiveSum(t, b, dv, out, n, stream); });
        std::vector<int> want(n);
        int s = 0;
        for (int i = 0; i < n; i++) {
            s += v[i];
            want[i] = s;
        }
        same("DeviceScan::InclusiveSum", download(out, n), want);
        with_temp("ExclusiveSum", [&](void *t, size_t &b) { return cub::DeviceScan::ExclusiveSum(t, b, dv, out, n, stream); });
        s = 0;
        for (int i = 0; i < n; i++) {
            want[i] = s;
            s += v[i];
        }
        same("DeviceScan::ExclusiveSum", download(out, n), want);
        with_temp("InclusiveScan max", [&](void *t, size_t &b) {
            return cub::DeviceScan::InclusiveScan(t, b, dv, out, cuda::maximum<int>(), n, stream);
        });
        int m = v[0];
        for (int i = 0; i < n; i++) {
            m = std::max(m, v[i]);
            want[i] = m;
        }
        same("DeviceScan::InclusiveScan max", download(out, n), want);
    }
    {
        int *r;
        CK(cudaMalloc(&r, 4 * sizeof(int)));
        with_temp("Sum", [&](void *t, size_t &b) { return cub::DeviceReduce::Sum(t, b, dv, r, n, stream); });
        with_temp("Max", [&](void *t, size_t &b) { return cub::DeviceReduce::Max(t, b, dv, r + 1, n, stream); });
        long long sum = 0;
        int mx = v[0];
        for (int x : v) {
            sum += x;
            mx = std::max(mx, x);
        }
        std::vector<int> got = download(r, 2);
        if (got[0] != (int) sum || got[1] != mx) {
            FAIL("DeviceReduce: sum %d max %d, expected %lld %d", got[0], got[1], sum, mx);
        }
        printf("DeviceReduce::Sum %d, Max %d: equal the CPU's\n", got[0], got[1]);
        int *argv;
        int64_t *argi;
        CK(cudaMalloc(&argv, sizeof(int)));
        CK(cudaMalloc(&argi, sizeof(int64_t)));
        with_temp("ArgMin", [&](void *t, size_t &b) { return cub::DeviceReduce::ArgMin(t, b, dv, argv, argi, (int64_t) n, stream); });
        int64_t at = std::min_element(v.begin(), v.end()) - v.begin();
        int gv = download(argv, 1)[0];
        int64_t gi = download(argi, 1)[0];
        if (gv != v[at] || gi != at) {
            FAIL("DeviceReduce::ArgMin: %d at %lld, expected %d at %lld", gv, (long long) gi, v[at], (long long) at);
        }
        printf("DeviceReduce::ArgMin %d at %lld: equal the CPU's\n", gv, (long long) gi);
        CK(cudaFree(r));
        CK(cudaFree(argv));
        CK(cudaFree(argi));
    }

    // histogram: 40 even bins of width 50 over [-1000, 1000)
    {
        const int bins = 40;
        int *hist;
        CK(cudaMalloc(&hist, bins * sizeof(int)));
        with_temp("HistogramEven", [&](void *t, size_t &b) {
            return cub::DeviceHistogram::HistogramEven(t, b, dv, hist, bins + 1, -1000, 1000, n, stream);
        });
        std::vector<int> want(bins, 0);
        for (int x : v) {
            if (x >= -1000 && x < 1000) {
                want[(size_t) ((long long) (x + 1000) * bins / 2000)]++;
            }
        }
        same("DeviceHistogram::HistogramEven", download(hist, bins), want);
        CK(cudaFree(hist));
    }

    // select: even values with a predicate, then the flagged ones
    {
        int *count;
        CK(cudaMalloc(&count, sizeof(int)));
        with_temp("If", [&](void *t, size_t &b) { return cub::DeviceSelect::If(t, b, dv, out, count, n, Even(), stream); });
        std::vector<int> want;
        for (int x : v) {
            if ((x & 1) == 0) {
                want.push_back(x);
            }
        }
        int got = download(count, 1)[0];
        same("DeviceSelect::If", download(out, got), want);
        std::vector<char> flags(n);
        want.clear();
        for (int i = 0; i < n; i++) {
            flags[i] = (char) (i % 3 == 0 || v[i] > 500);
            if (flags[i]) {
                want.push_back(v[i]);
            }
        }
        char *df = upload(flags);
        with_temp("Flagged", [&](void *t, size_t &b) { return cub::DeviceSelect::Flagged(t, b, dv, df, out, count, n, stream); });
        got = download(count, 1)[0];
        same("DeviceSelect::Flagged", download(out, got), want);
        CK(cudaFree(df));
        CK(cudaFree(count));
    }

    // run-length encoding of runs of 1..7 equal values
    {
        std::vector<int> runs;
        std::vector<int> want_unique, want_counts;
        while ((int) runs.size() < n) {
            int value = (int) (splitmix64(&seed) % 5);
            int len = 1 + (int) (splitmix64(&seed) % 7);
            if (!want_unique.empty() && want_unique.back() == value) {
                continue;
            }
            len = std::min(len, n - (int) runs.size());
            want_unique.push_back(value);
            want_counts.push_back(len);
            runs.insert(runs.end(), len, value);
        }
        int *dr = upload(runs), *uniq, *counts, *nruns;
        CK(cudaMalloc(&uniq, n * sizeof(int)));
        CK(cudaMalloc(&counts, n * sizeof(int)));
        CK(cudaMalloc(&nruns, sizeof(int)));
        with_temp("Encode", [&](void *t, size_t &b) {
            return cub::DeviceRunLengthEncode::Encode(t, b, dr, uniq, counts, nruns, n, stream);
        });
        int got = download(nruns, 1)[0];
        same("DeviceRunLengthEncode::Encode unique", download(uniq, got), want_unique);
        same("DeviceRunLengthEncode::Encode counts", download(counts, got), want_counts);
        CK(cudaFree(dr));
        CK(cudaFree(uniq));
        CK(cudaFree(counts));
        CK(cudaFree(nruns));
    }

    // segmented reduction: 37 segments of uneven lengths (one empty)
    {
        const int segs = 37;
        std::vector<int> offsets(segs + 1);
        for (int s = 0; s <= segs; s++) {
            offsets[s] = (int) ((long long) n * s * s / (segs * segs));
        }
        offsets[5] = offsets[4];
        int *doff = upload(offsets), *sums;
        CK(cudaMalloc(&sums, segs * sizeof(int)));
        with_temp("SegmentedReduce", [&](void *t, size_t &b) {
            return cub::DeviceSegmentedReduce::Sum(t, b, dv, sums, segs, doff, doff + 1, stream);
        });
        std::vector<int> want(segs, 0);
        for (int s = 0; s < segs; s++) {
            for (int i = offsets[s]; i < offsets[s + 1]; i++) {
                want[s] += v[i];
            }
        }
        same("DeviceSegmentedReduce::Sum", download(sums, segs), want);
        CK(cudaFree(doff));
        CK(cudaFree(sums));
    }

    // block- and warp-level primitives
    {
        const int blocks = 3;
        const int m = blocks * BLOCK * ITEMS;
        int *scanned, *sums, *sorted, *warp_sums;
        CK(cudaMalloc(&scanned, m * sizeof(int)));
        CK(cudaMalloc(&sorted, m * sizeof(int)));
        CK(cudaMalloc(&sums, blocks * sizeof(int)));
        CK(cudaMalloc(&warp_sums, blocks * (BLOCK / 32) * sizeof(int)));
        block_primitives<<<blocks, BLOCK, 0, stream>>>(dv, scanned, sums, sorted, warp_sums);
        CK(cudaGetLastError());
        CK(cudaStreamSynchronize(stream));
        std::vector<int> ws(m), wt(blocks), wsort(m), wwarp(blocks * (BLOCK / 32), 0);
        for (int b = 0; b < blocks; b++) {
            int s = 0;
            for (int i = 0; i < BLOCK * ITEMS; i++) {
                ws[b * BLOCK * ITEMS + i] = s;
                s += v[b * BLOCK * ITEMS + i];
            }
            wt[b] = s;
            std::vector<int> part(v.begin() + b * BLOCK * ITEMS, v.begin() + (b + 1) * BLOCK * ITEMS);
            std::sort(part.begin(), part.end());
            std::copy(part.begin(), part.end(), wsort.begin() + b * BLOCK * ITEMS);
            for (int t = 0; t < BLOCK; t++) {
                wwarp[b * (BLOCK / 32) + t / 32] += v[b * BLOCK * ITEMS + t * ITEMS];
            }
        }
        same("BlockScan::ExclusiveSum", download(scanned, m), ws);
        same("BlockReduce::Sum", download(sums, blocks), wt);
        same("BlockRadixSort::Sort", download(sorted, m), wsort);
        same("WarpReduce::Sum", download(warp_sums, blocks * (BLOCK / 32)), wwarp);
        CK(cudaFree(scanned));
        CK(cudaFree(sorted));
        CK(cudaFree(sums));
        CK(cudaFree(warp_sums));
    }
    CK(cudaFree(dv));
    CK(cudaFree(out));
    CK(cudaStreamDestroy(stream));
    printf("PASS\n");
    return 0;
}
