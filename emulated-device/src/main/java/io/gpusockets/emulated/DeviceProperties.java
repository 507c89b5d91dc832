package io.gpusockets.emulated;

import java.nio.ByteBuffer;
import java.util.Map;
import java.util.UUID;

/**
 * What the emulated device says about itself. The numbers are those of an H200 (compute capability
 * 9.0, 132 multiprocessors) so that programs size their launches as they would on the GPU suite's
 * machine; features the device does not emulate (mipmapped and linear-memory texture limits, managed memory,
 * host mapping, clusters) read as 0, which is how a real device says "not supported"; those it does (memory pools,
 * virtual memory management, cooperative launch, 64-bit stream memory operations) read 1.
 */
final class DeviceProperties {
    static final String NAME = "GPUsockets emulated device (no GPU)";
    static final int DRIVER_VERSION = 13000;
    /** cuCtxGetApiVersion of every context created through the v2+ API (the real driver answers 3020). */
    static final int CONTEXT_API_VERSION = 3020;

    static final int MAX_THREADS_PER_BLOCK = 1024;
    static final int MAX_BLOCK_DIM_X = 1024;
    static final int MAX_BLOCK_DIM_Y = 1024;
    static final int MAX_BLOCK_DIM_Z = 64;
    static final long MAX_GRID_DIM_X = 2147483647L;
    static final long MAX_GRID_DIM_YZ = 65535L;
    static final int SHARED_MEMORY_PER_BLOCK = 49152;
    static final int SHARED_MEMORY_PER_BLOCK_OPTIN = 232448;
    static final int SHARED_MEMORY_PER_MULTIPROCESSOR = 233472;
    static final int RESERVED_SHARED_MEMORY_PER_BLOCK = 1024;
    static final int MULTIPROCESSOR_COUNT = 132;
    static final int MAX_THREADS_PER_MULTIPROCESSOR = 2048;
    static final int MAX_BLOCKS_PER_MULTIPROCESSOR = 32;
    static final int REGISTERS_PER_MULTIPROCESSOR = 65536;
    static final int WARP_SIZE = 32;
    static final int COMPUTE_CAPABILITY_MAJOR = 75;
    static final int COMPUTE_CAPABILITY_MINOR = 76;
    /** CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE as the H200 reports it; bounds CU_LIMIT_PERSISTING_L2_CACHE_SIZE. */
    static final int MAX_PERSISTING_L2_CACHE_SIZE = 39321600;
    /** Highest CUdevice_attribute of cuda.h 13.0 (CU_DEVICE_ATTRIBUTE_MAX is one more). */
    static final int LAST_ATTRIBUTE = 147;

    private static final Map<Integer, Integer> ATTRIBUTES = Map.ofEntries(
            Map.entry(1, MAX_THREADS_PER_BLOCK),
            Map.entry(2, MAX_BLOCK_DIM_X),
            Map.entry(3, MAX_BLOCK_DIM_Y),
            Map.entry(4, MAX_BLOCK_DIM_Z),
            Map.entry(5, (int) MAX_GRID_DIM_X),
            Map.entry(6, (int) MAX_GRID_DIM_YZ),
            Map.entry(7, (int) MAX_GRID_DIM_YZ),
            Map.entry(8, SHARED_MEMORY_PER_BLOCK),
            Map.entry(9, 65536),                  // total constant memory
            Map.entry(10, WARP_SIZE),
            Map.entry(11, 2147483647),            // max pitch
            Map.entry(12, 65536),                 // registers per block
            Map.entry(13, 1980000),               // clock rate, kHz
            Map.entry(14, 512),                   // texture alignment
            Map.entry(15, 1),                     // copy and kernel overlap
            Map.entry(16, MULTIPROCESSOR_COUNT),
            Map.entry(20, 0),                     // compute mode: default
            Map.entry(30, 512),                   // surface alignment
            Map.entry(31, 1),                     // concurrent kernels (streams run concurrently)
            Map.entry(36, 2619000),               // memory clock rate, kHz
            Map.entry(37, 6144),                  // memory bus width, bits
            Map.entry(38, 52428800),              // L2 cache size
            Map.entry(39, MAX_THREADS_PER_MULTIPROCESSOR),
            Map.entry(40, 2),                     // async engines
            Map.entry(41, 1),                     // unified addressing: device pointers are unique
            Map.entry(51, 32),                    // texture pitch alignment
            Map.entry(75, 9),                     // compute capability major
            Map.entry(76, 0),                     // compute capability minor
            Map.entry(78, 1),                     // stream priorities
            Map.entry(79, 1),                     // global L1 cache
            Map.entry(80, 1),                     // local L1 cache
            Map.entry(81, SHARED_MEMORY_PER_MULTIPROCESSOR),
            Map.entry(82, REGISTERS_PER_MULTIPROCESSOR),
            Map.entry(87, 2),                     // single to double precision performance ratio
            Map.entry(95, 1),                     // cooperative launch (cuLaunchCooperativeKernel; no grid-wide barrier)
            Map.entry(97, SHARED_MEMORY_PER_BLOCK_OPTIN),
            Map.entry(102, 1),                    // virtual memory management (cuMemCreate/Map: VirtualMemory)
            Map.entry(103, 1),                    // POSIX descriptor handles (exportable allocations: MemoryFiles)
            Map.entry(115, 1),                    // memory pools and stream-ordered allocation (MemoryPools)
            Map.entry(106, MAX_BLOCKS_PER_MULTIPROCESSOR),
            Map.entry(122, 1),                    // 64-bit stream memory operations (StreamMemOps)
            Map.entry(125, 1),                    // IPC events (IpcEvents; IPC memory handles: IpcMemory)
            Map.entry(108, MAX_PERSISTING_L2_CACHE_SIZE),
            Map.entry(111, RESERVED_SHARED_MEMORY_PER_BLOCK),
            Map.entry(131, -1),                   // NUMA id of device memory: none
            Map.entry(134, -1),                   // host NUMA id: none
            // texture and surface limits (CudaArrays, KernelTextures): compute capability 9.0's, as the CUDA C++
            // Programming Guide's technical specifications give them
            Map.entry(21, 131072),                // texture 1D width
            Map.entry(22, 131072),                // texture 2D width, height
            Map.entry(23, 65536),
            Map.entry(24, 16384),                 // texture 3D width, height, depth
            Map.entry(25, 16384),
            Map.entry(26, 16384),
            Map.entry(27, 32768),                 // texture 2D layered width, height, layers
            Map.entry(28, 32768),
            Map.entry(29, 2048),
            Map.entry(42, 32768),                 // texture 1D layered width, layers
            Map.entry(43, 2048),
            Map.entry(45, 32768),                 // texture 2D gather width, height
            Map.entry(46, 32768),
            Map.entry(47, 8192),                  // texture 3D alternate width, height, depth
            Map.entry(48, 8192),
            Map.entry(49, 32768),
            Map.entry(52, 32768),                 // cubemap width; layered width, layers
            Map.entry(53, 32768),
            Map.entry(54, 2046),
            Map.entry(55, 32768),                 // surface 1D width
            Map.entry(56, 131072),                // surface 2D width, height
            Map.entry(57, 65536),
            Map.entry(58, 16384),                 // surface 3D width, height, depth
            Map.entry(59, 16384),
            Map.entry(60, 16384),
            Map.entry(61, 32768),                 // surface 1D layered width, layers
            Map.entry(62, 2048),
            Map.entry(63, 32768),                 // surface 2D layered width, height, layers
            Map.entry(64, 32768),
            Map.entry(65, 2048),
            Map.entry(66, 32768),                 // surface cubemap width; layered width, layers
            Map.entry(67, 32768),
            Map.entry(68, 2046));

    private final UUID[] uuids;

    /**
     * @param uuidSeed what the devices' UUIDs derive from: a random one per backend (two emulated backends merged
     *                 into one device list by a frontend must not present the same UUID), handed by a backend to its
     *                 worker processes, so that every session of a backend sees the same device, as on a GPU
     */
    DeviceProperties(int deviceCount, long uuidSeed) {
        uuids = new UUID[deviceCount];
        java.util.SplittableRandom r = new java.util.SplittableRandom(uuidSeed);
        for (int i = 0; i < deviceCount; i++) {
            long msb = r.nextLong() & ~0xF000L | 0x4000L;                  // version 4
            long lsb = r.nextLong() & 0x3FFF_FFFF_FFFF_FFFFL | 0x8000_0000_0000_0000L; // IETF variant
            uuids[i] = new UUID(msb, lsb);
        }
    }

    /** The attribute's value, or null for a number that is no CUdevice_attribute. */
    static Integer attribute(int attribute, int ordinal) {
        if (attribute == 33) {
            return ordinal;                       // PCI bus id: distinct per device
        }
        Integer value = ATTRIBUTES.get(attribute);
        if (value != null) {
            return value;
        }
        return attribute >= 1 && attribute <= LAST_ATTRIBUTE ? 0 : null;
    }

    byte[] uuid(int ordinal) {
        UUID u = uuids[ordinal];
        return ByteBuffer.allocate(16).putLong(u.getMostSignificantBits()).putLong(u.getLeastSignificantBits()).array();
    }
}
