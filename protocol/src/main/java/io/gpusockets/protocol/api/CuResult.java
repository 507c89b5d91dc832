package io.gpusockets.protocol.api;

import java.util.HashMap;
import java.util.Map;

/**
 * CUresult codes and their names and descriptions (from cuda.h 13.0), so the frontend can answer
 * cuGetErrorName/cuGetErrorString without a round trip.
 */
public final class CuResult {
    public static final int CUDA_SUCCESS = 0;
    public static final int CUDA_ERROR_INVALID_VALUE = 1;
    public static final int CUDA_ERROR_OUT_OF_MEMORY = 2;
    public static final int CUDA_ERROR_NOT_INITIALIZED = 3;
    public static final int CUDA_ERROR_DEINITIALIZED = 4;
    public static final int CUDA_ERROR_PROFILER_DISABLED = 5;
    public static final int CUDA_ERROR_PROFILER_NOT_INITIALIZED = 6;
    public static final int CUDA_ERROR_PROFILER_ALREADY_STARTED = 7;
    public static final int CUDA_ERROR_PROFILER_ALREADY_STOPPED = 8;
    public static final int CUDA_ERROR_STUB_LIBRARY = 34;
    public static final int CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER = 36;
    public static final int CUDA_ERROR_DEVICE_UNAVAILABLE = 46;
    public static final int CUDA_ERROR_NO_DEVICE = 100;
    public static final int CUDA_ERROR_INVALID_DEVICE = 101;
    public static final int CUDA_ERROR_DEVICE_NOT_LICENSED = 102;
    public static final int CUDA_ERROR_INVALID_IMAGE = 200;
    public static final int CUDA_ERROR_INVALID_CONTEXT = 201;
    public static final int CUDA_ERROR_CONTEXT_ALREADY_CURRENT = 202;
    public static final int CUDA_ERROR_MAP_FAILED = 205;
    public static final int CUDA_ERROR_UNMAP_FAILED = 206;
    public static final int CUDA_ERROR_ARRAY_IS_MAPPED = 207;
    public static final int CUDA_ERROR_ALREADY_MAPPED = 208;
    public static final int CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
    public static final int CUDA_ERROR_ALREADY_ACQUIRED = 210;
    public static final int CUDA_ERROR_NOT_MAPPED = 211;
    public static final int CUDA_ERROR_NOT_MAPPED_AS_ARRAY = 212;
    public static final int CUDA_ERROR_NOT_MAPPED_AS_POINTER = 213;
    public static final int CUDA_ERROR_ECC_UNCORRECTABLE = 214;
    public static final int CUDA_ERROR_UNSUPPORTED_LIMIT = 215;
    public static final int CUDA_ERROR_CONTEXT_ALREADY_IN_USE = 216;
    public static final int CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217;
    public static final int CUDA_ERROR_INVALID_PTX = 218;
    public static final int CUDA_ERROR_INVALID_GRAPHICS_CONTEXT = 219;
    public static final int CUDA_ERROR_NVLINK_UNCORRECTABLE = 220;
    public static final int CUDA_ERROR_JIT_COMPILER_NOT_FOUND = 221;
    public static final int CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;
    public static final int CUDA_ERROR_JIT_COMPILATION_DISABLED = 223;
    public static final int CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY = 224;
    public static final int CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC = 225;
    public static final int CUDA_ERROR_CONTAINED = 226;
    public static final int CUDA_ERROR_INVALID_SOURCE = 300;
    public static final int CUDA_ERROR_FILE_NOT_FOUND = 301;
    public static final int CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND = 302;
    public static final int CUDA_ERROR_SHARED_OBJECT_INIT_FAILED = 303;
    public static final int CUDA_ERROR_OPERATING_SYSTEM = 304;
    public static final int CUDA_ERROR_INVALID_HANDLE = 400;
    public static final int CUDA_ERROR_ILLEGAL_STATE = 401;
    public static final int CUDA_ERROR_LOSSY_QUERY = 402;
    public static final int CUDA_ERROR_NOT_FOUND = 500;
    public static final int CUDA_ERROR_NOT_READY = 600;
    public static final int CUDA_ERROR_ILLEGAL_ADDRESS = 700;
    public static final int CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701;
    public static final int CUDA_ERROR_LAUNCH_TIMEOUT = 702;
    public static final int CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING = 703;
    public static final int CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704;
    public static final int CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705;
    public static final int CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE = 708;
    public static final int CUDA_ERROR_CONTEXT_IS_DESTROYED = 709;
    public static final int CUDA_ERROR_ASSERT = 710;
    public static final int CUDA_ERROR_TOO_MANY_PEERS = 711;
    public static final int CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712;
    public static final int CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713;
    public static final int CUDA_ERROR_HARDWARE_STACK_ERROR = 714;
    public static final int CUDA_ERROR_ILLEGAL_INSTRUCTION = 715;
    public static final int CUDA_ERROR_MISALIGNED_ADDRESS = 716;
    public static final int CUDA_ERROR_INVALID_ADDRESS_SPACE = 717;
    public static final int CUDA_ERROR_INVALID_PC = 718;
    public static final int CUDA_ERROR_LAUNCH_FAILED = 719;
    public static final int CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720;
    public static final int CUDA_ERROR_TENSOR_MEMORY_LEAK = 721;
    public static final int CUDA_ERROR_NOT_PERMITTED = 800;
    public static final int CUDA_ERROR_NOT_SUPPORTED = 801;
    public static final int CUDA_ERROR_SYSTEM_NOT_READY = 802;
    public static final int CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803;
    public static final int CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804;
    public static final int CUDA_ERROR_MPS_CONNECTION_FAILED = 805;
    public static final int CUDA_ERROR_MPS_RPC_FAILURE = 806;
    public static final int CUDA_ERROR_MPS_SERVER_NOT_READY = 807;
    public static final int CUDA_ERROR_MPS_MAX_CLIENTS_REACHED = 808;
    public static final int CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED = 809;
    public static final int CUDA_ERROR_MPS_CLIENT_TERMINATED = 810;
    public static final int CUDA_ERROR_CDP_NOT_SUPPORTED = 811;
    public static final int CUDA_ERROR_CDP_VERSION_MISMATCH = 812;
    public static final int CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900;
    public static final int CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901;
    public static final int CUDA_ERROR_STREAM_CAPTURE_MERGE = 902;
    public static final int CUDA_ERROR_STREAM_CAPTURE_UNMATCHED = 903;
    public static final int CUDA_ERROR_STREAM_CAPTURE_UNJOINED = 904;
    public static final int CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905;
    public static final int CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906;
    public static final int CUDA_ERROR_CAPTURED_EVENT = 907;
    public static final int CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908;
    public static final int CUDA_ERROR_TIMEOUT = 909;
    public static final int CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 910;
    public static final int CUDA_ERROR_EXTERNAL_DEVICE = 911;
    public static final int CUDA_ERROR_INVALID_CLUSTER_SIZE = 912;
    public static final int CUDA_ERROR_FUNCTION_NOT_LOADED = 913;
    public static final int CUDA_ERROR_INVALID_RESOURCE_TYPE = 914;
    public static final int CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION = 915;
    public static final int CUDA_ERROR_KEY_ROTATION = 916;
    public static final int CUDA_ERROR_UNKNOWN = 999;

    private static final Map<Integer, String[]> TEXT = new HashMap<>();

    static {
        TEXT.put(0, new String[] {"CUDA_SUCCESS", "The API call returned with no errors"});
        TEXT.put(1, new String[] {"CUDA_ERROR_INVALID_VALUE", "This indicates that one or more of the parameters passed to the API call is not within an acceptable range of values"});
        TEXT.put(2, new String[] {"CUDA_ERROR_OUT_OF_MEMORY", "The API call failed because it was unable to allocate enough memory or other resources to perform the requested operation"});
        TEXT.put(3, new String[] {"CUDA_ERROR_NOT_INITIALIZED", "This indicates that the CUDA driver has not been initialized with ::cuInit() or that initialization has failed"});
        TEXT.put(4, new String[] {"CUDA_ERROR_DEINITIALIZED", "This indicates that the CUDA driver is in the process of shutting down"});
        TEXT.put(5, new String[] {"CUDA_ERROR_PROFILER_DISABLED", "This indicates profiler is not initialized for this run"});
        TEXT.put(6, new String[] {"CUDA_ERROR_PROFILER_NOT_INITIALIZED", "deprecated This error return is deprecated as of CUDA 5.0. It is no longer an error to attempt to enable/disable the profiling via ::cuProfilerStart or ::cuProfilerStop without initialization"});
        TEXT.put(7, new String[] {"CUDA_ERROR_PROFILER_ALREADY_STARTED", "deprecated This error return is deprecated as of CUDA 5.0. It is no longer an error to call cuProfilerStart() when profiling is already enabled"});
        TEXT.put(8, new String[] {"CUDA_ERROR_PROFILER_ALREADY_STOPPED", "deprecated This error return is deprecated as of CUDA 5.0. It is no longer an error to call cuProfilerStop() when profiling is already disabled"});
        TEXT.put(34, new String[] {"CUDA_ERROR_STUB_LIBRARY", "This indicates that the CUDA driver that the application has loaded is a stub library"});
        TEXT.put(36, new String[] {"CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", "This indicates that the API call requires a newer CUDA driver than the one currently installed"});
        TEXT.put(46, new String[] {"CUDA_ERROR_DEVICE_UNAVAILABLE", "This indicates that requested CUDA device is unavailable at the current time"});
        TEXT.put(100, new String[] {"CUDA_ERROR_NO_DEVICE", "This indicates that no CUDA-capable devices were detected by the installed CUDA driver"});
        TEXT.put(101, new String[] {"CUDA_ERROR_INVALID_DEVICE", "This indicates that the device ordinal supplied by the user does not correspond to a valid CUDA device or that the action requested is invalid for the specified device"});
        TEXT.put(102, new String[] {"CUDA_ERROR_DEVICE_NOT_LICENSED", "This error indicates that the Grid license is not applied"});
        TEXT.put(200, new String[] {"CUDA_ERROR_INVALID_IMAGE", "This indicates that the device kernel image is invalid"});
        TEXT.put(201, new String[] {"CUDA_ERROR_INVALID_CONTEXT", "This most frequently indicates that there is no context bound to the current thread"});
        TEXT.put(202, new String[] {"CUDA_ERROR_CONTEXT_ALREADY_CURRENT", "This indicated that the context being supplied as a parameter to the API call was already the active context"});
        TEXT.put(205, new String[] {"CUDA_ERROR_MAP_FAILED", "This indicates that a map or register operation has failed"});
        TEXT.put(206, new String[] {"CUDA_ERROR_UNMAP_FAILED", "This indicates that an unmap or unregister operation has failed"});
        TEXT.put(207, new String[] {"CUDA_ERROR_ARRAY_IS_MAPPED", "This indicates that the specified array is currently mapped and thus cannot be destroyed"});
        TEXT.put(208, new String[] {"CUDA_ERROR_ALREADY_MAPPED", "This indicates that the resource is already mapped"});
        TEXT.put(209, new String[] {"CUDA_ERROR_NO_BINARY_FOR_GPU", "This indicates that there is no kernel image available that is suitable for the device"});
        TEXT.put(210, new String[] {"CUDA_ERROR_ALREADY_ACQUIRED", "This indicates that a resource has already been acquired"});
        TEXT.put(211, new String[] {"CUDA_ERROR_NOT_MAPPED", "This indicates that a resource is not mapped"});
        TEXT.put(212, new String[] {"CUDA_ERROR_NOT_MAPPED_AS_ARRAY", "This indicates that a mapped resource is not available for access as an array"});
        TEXT.put(213, new String[] {"CUDA_ERROR_NOT_MAPPED_AS_POINTER", "This indicates that a mapped resource is not available for access as a pointer"});
        TEXT.put(214, new String[] {"CUDA_ERROR_ECC_UNCORRECTABLE", "This indicates that an uncorrectable ECC error was detected during execution"});
        TEXT.put(215, new String[] {"CUDA_ERROR_UNSUPPORTED_LIMIT", "This indicates that the ::CUlimit passed to the API call is not supported by the active device"});
        TEXT.put(216, new String[] {"CUDA_ERROR_CONTEXT_ALREADY_IN_USE", "This indicates that the ::CUcontext passed to the API call can only be bound to a single CPU thread at a time but is already bound to a CPU thread"});
        TEXT.put(217, new String[] {"CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "This indicates that peer access is not supported across the given devices"});
        TEXT.put(218, new String[] {"CUDA_ERROR_INVALID_PTX", "This indicates that a PTX JIT compilation failed"});
        TEXT.put(219, new String[] {"CUDA_ERROR_INVALID_GRAPHICS_CONTEXT", "This indicates an error with OpenGL or DirectX context"});
        TEXT.put(220, new String[] {"CUDA_ERROR_NVLINK_UNCORRECTABLE", "This indicates that an uncorrectable NVLink error was detected during the execution"});
        TEXT.put(221, new String[] {"CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "This indicates that the PTX JIT compiler library was not found"});
        TEXT.put(222, new String[] {"CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "This indicates that the provided PTX was compiled with an unsupported toolchain"});
        TEXT.put(223, new String[] {"CUDA_ERROR_JIT_COMPILATION_DISABLED", "This indicates that the PTX JIT compilation was disabled"});
        TEXT.put(224, new String[] {"CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY", "This indicates that the ::CUexecAffinityType passed to the API call is not supported by the active device"});
        TEXT.put(225, new String[] {"CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC", "This indicates that the code to be compiled by the PTX JIT contains unsupported call to cudaDeviceSynchronize"});
        TEXT.put(226, new String[] {"CUDA_ERROR_CONTAINED", "This indicates that an exception occurred on the device that is now contained by the GPU's error containment capability"});
        TEXT.put(300, new String[] {"CUDA_ERROR_INVALID_SOURCE", "This indicates that the device kernel source is invalid"});
        TEXT.put(301, new String[] {"CUDA_ERROR_FILE_NOT_FOUND", "This indicates that the file specified was not found"});
        TEXT.put(302, new String[] {"CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", "This indicates that a link to a shared object failed to resolve"});
        TEXT.put(303, new String[] {"CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", "This indicates that initialization of a shared object failed"});
        TEXT.put(304, new String[] {"CUDA_ERROR_OPERATING_SYSTEM", "This indicates that an OS call failed"});
        TEXT.put(400, new String[] {"CUDA_ERROR_INVALID_HANDLE", "This indicates that a resource handle passed to the API call was not valid"});
        TEXT.put(401, new String[] {"CUDA_ERROR_ILLEGAL_STATE", "This indicates that a resource required by the API call is not in a valid state to perform the requested operation"});
        TEXT.put(402, new String[] {"CUDA_ERROR_LOSSY_QUERY", "This indicates an attempt was made to introspect an object in a way that would discard semantically important information"});
        TEXT.put(500, new String[] {"CUDA_ERROR_NOT_FOUND", "This indicates that a named symbol was not found"});
        TEXT.put(600, new String[] {"CUDA_ERROR_NOT_READY", "This indicates that asynchronous operations issued previously have not completed yet"});
        TEXT.put(700, new String[] {"CUDA_ERROR_ILLEGAL_ADDRESS", "While executing a kernel, the device encountered a load or store instruction on an invalid memory address"});
        TEXT.put(701, new String[] {"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "This indicates that a launch did not occur because it did not have appropriate resources"});
        TEXT.put(702, new String[] {"CUDA_ERROR_LAUNCH_TIMEOUT", "This indicates that the device kernel took too long to execute"});
        TEXT.put(703, new String[] {"CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING", "This error indicates a kernel launch that uses an incompatible texturing mode"});
        TEXT.put(704, new String[] {"CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "This error indicates that a call to ::cuCtxEnablePeerAccess() is trying to re-enable peer access to a context which has already had peer access to it enabled"});
        TEXT.put(705, new String[] {"CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "This error indicates that ::cuCtxDisablePeerAccess() is trying to disable peer access which has not been enabled yet via ::cuCtxEnablePeerAccess()"});
        TEXT.put(708, new String[] {"CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "This error indicates that the primary context for the specified device has already been initialized"});
        TEXT.put(709, new String[] {"CUDA_ERROR_CONTEXT_IS_DESTROYED", "This error indicates that the context current to the calling thread has been destroyed using ::cuCtxDestroy, or is a primary context which has not yet been initialized"});
        TEXT.put(710, new String[] {"CUDA_ERROR_ASSERT", "A device-side assert triggered during kernel execution"});
        TEXT.put(711, new String[] {"CUDA_ERROR_TOO_MANY_PEERS", "This error indicates that the hardware resources required to enable peer access have been exhausted for one or more of the devices passed to ::cuCtxEnablePeerAccess()"});
        TEXT.put(712, new String[] {"CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "This error indicates that the memory range passed to ::cuMemHostRegister() has already been registered"});
        TEXT.put(713, new String[] {"CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "This error indicates that the pointer passed to ::cuMemHostUnregister() does not correspond to any currently registered memory region"});
        TEXT.put(714, new String[] {"CUDA_ERROR_HARDWARE_STACK_ERROR", "While executing a kernel, the device encountered a stack error"});
        TEXT.put(715, new String[] {"CUDA_ERROR_ILLEGAL_INSTRUCTION", "While executing a kernel, the device encountered an illegal instruction"});
        TEXT.put(716, new String[] {"CUDA_ERROR_MISALIGNED_ADDRESS", "While executing a kernel, the device encountered a load or store instruction on a memory address which is not aligned"});
        TEXT.put(717, new String[] {"CUDA_ERROR_INVALID_ADDRESS_SPACE", "While executing a kernel, the device encountered an instruction which can only operate on memory locations in certain address spaces (global, shared, or local), but was supplied a memory address not belonging to an allowed address space"});
        TEXT.put(718, new String[] {"CUDA_ERROR_INVALID_PC", "While executing a kernel, the device program counter wrapped its address space"});
        TEXT.put(719, new String[] {"CUDA_ERROR_LAUNCH_FAILED", "An exception occurred on the device while executing a kernel"});
        TEXT.put(720, new String[] {"CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "This error indicates that the number of blocks launched per grid for a kernel that was launched via either ::cuLaunchCooperativeKernel or ::cuLaunchCooperativeKernelMultiDevice exceeds the maximum number of blocks as allowed by ::cuOccupancyMaxActiveBlocksPerMultiprocessor or ::cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags times the number of multiprocessors as specified by the device attribute ::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"});
        TEXT.put(721, new String[] {"CUDA_ERROR_TENSOR_MEMORY_LEAK", "An exception occurred on the device while exiting a kernel using tensor memory: the tensor memory was not completely deallocated"});
        TEXT.put(800, new String[] {"CUDA_ERROR_NOT_PERMITTED", "This error indicates that the attempted operation is not permitted"});
        TEXT.put(801, new String[] {"CUDA_ERROR_NOT_SUPPORTED", "This error indicates that the attempted operation is not supported on the current system or device"});
        TEXT.put(802, new String[] {"CUDA_ERROR_SYSTEM_NOT_READY", "This error indicates that the system is not yet ready to start any CUDA work"});
        TEXT.put(803, new String[] {"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "This error indicates that there is a mismatch between the versions of the display driver and the CUDA driver"});
        TEXT.put(804, new String[] {"CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "This error indicates that the system was upgraded to run with forward compatibility but the visible hardware detected by CUDA does not support this configuration"});
        TEXT.put(805, new String[] {"CUDA_ERROR_MPS_CONNECTION_FAILED", "This error indicates that the MPS client failed to connect to the MPS control daemon or the MPS server"});
        TEXT.put(806, new String[] {"CUDA_ERROR_MPS_RPC_FAILURE", "This error indicates that the remote procedural call between the MPS server and the MPS client failed"});
        TEXT.put(807, new String[] {"CUDA_ERROR_MPS_SERVER_NOT_READY", "This error indicates that the MPS server is not ready to accept new MPS client requests"});
        TEXT.put(808, new String[] {"CUDA_ERROR_MPS_MAX_CLIENTS_REACHED", "This error indicates that the hardware resources required to create MPS client have been exhausted"});
        TEXT.put(809, new String[] {"CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED", "This error indicates the the hardware resources required to support device connections have been exhausted"});
        TEXT.put(810, new String[] {"CUDA_ERROR_MPS_CLIENT_TERMINATED", "This error indicates that the MPS client has been terminated by the server"});
        TEXT.put(811, new String[] {"CUDA_ERROR_CDP_NOT_SUPPORTED", "This error indicates that the module is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it"});
        TEXT.put(812, new String[] {"CUDA_ERROR_CDP_VERSION_MISMATCH", "This error indicates that a module contains an unsupported interaction between different versions of CUDA Dynamic Parallelism"});
        TEXT.put(900, new String[] {"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "This error indicates that the operation is not permitted when the stream is capturing"});
        TEXT.put(901, new String[] {"CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "This error indicates that the current capture sequence on the stream has been invalidated due to a previous error"});
        TEXT.put(902, new String[] {"CUDA_ERROR_STREAM_CAPTURE_MERGE", "This error indicates that the operation would have resulted in a merge of two independent capture sequences"});
        TEXT.put(903, new String[] {"CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "This error indicates that the capture was not initiated in this stream"});
        TEXT.put(904, new String[] {"CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "This error indicates that the capture sequence contains a fork that was not joined to the primary stream"});
        TEXT.put(905, new String[] {"CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "This error indicates that a dependency would have been created which crosses the capture sequence boundary"});
        TEXT.put(906, new String[] {"CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "This error indicates a disallowed implicit dependency on a current capture sequence from cudaStreamLegacy"});
        TEXT.put(907, new String[] {"CUDA_ERROR_CAPTURED_EVENT", "This error indicates that the operation is not permitted on an event which was last recorded in a capturing stream"});
        TEXT.put(908, new String[] {"CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "A stream capture sequence not initiated with the ::CU_STREAM_CAPTURE_MODE_RELAXED argument to ::cuStreamBeginCapture was passed to ::cuStreamEndCapture in a different thread"});
        TEXT.put(909, new String[] {"CUDA_ERROR_TIMEOUT", "This error indicates that the timeout specified for the wait operation has lapsed"});
        TEXT.put(910, new String[] {"CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", "This error indicates that the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"});
        TEXT.put(911, new String[] {"CUDA_ERROR_EXTERNAL_DEVICE", "This indicates that an async error has occurred in a device outside of CUDA. If CUDA was waiting for an external device's signal before consuming shared data, the external device signaled an error indicating that the data is not valid for consumption"});
        TEXT.put(912, new String[] {"CUDA_ERROR_INVALID_CLUSTER_SIZE", "Indicates a kernel launch error due to cluster misconfiguration"});
        TEXT.put(913, new String[] {"CUDA_ERROR_FUNCTION_NOT_LOADED", "Indiciates a function handle is not loaded when calling an API that requires a loaded function"});
        TEXT.put(914, new String[] {"CUDA_ERROR_INVALID_RESOURCE_TYPE", "This error indicates one or more resources passed in are not valid resource types for the operation"});
        TEXT.put(915, new String[] {"CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION", "This error indicates one or more resources are insufficient or non-applicable for the operation"});
        TEXT.put(916, new String[] {"CUDA_ERROR_KEY_ROTATION", "This error indicates that an error happened during the key rotation sequence"});
        TEXT.put(999, new String[] {"CUDA_ERROR_UNKNOWN", "This indicates that an unknown internal error has occurred"});
    }

    private CuResult() {
    }

    /** Whether the code is one cuda.h defines. */
    public static boolean isKnown(int code) {
        return TEXT.containsKey(code);
    }

    /** The enum name, e.g. {@code CUDA_ERROR_INVALID_VALUE}; {@code CUDA_ERROR_<code>} for unknown codes. */
    public static String name(int code) {
        String[] t = TEXT.get(code);
        return t != null ? t[0] : "CUDA_ERROR_" + code;
    }

    /** The code of an enum name such as {@code CUDA_ERROR_INVALID_VALUE}, or -1 when cuda.h defines none by that name. */
    public static int code(String name) {
        for (var e : TEXT.entrySet()) {
            if (e.getValue()[0].equals(name)) {
                return e.getKey();
            }
        }
        return -1;
    }

    /**
     * Whether the code is one of the kernel faults that, as CUDA's documentation of each says, "leaves the
     * process in an inconsistent state and any further CUDA work will return the same error. To continue using
     * CUDA, the process must be terminated and relaunched": ILLEGAL_ADDRESS, LAUNCH_TIMEOUT, ASSERT,
     * HARDWARE_STACK_ERROR, ILLEGAL_INSTRUCTION, MISALIGNED_ADDRESS, INVALID_ADDRESS_SPACE, INVALID_PC and
     * LAUNCH_FAILED. On the H200 (driver 580) every later context creation in the process failed after one.
     */
    public static boolean poisonsProcess(int code) {
        return code == CUDA_ERROR_ILLEGAL_ADDRESS || code == CUDA_ERROR_LAUNCH_TIMEOUT || code == CUDA_ERROR_ASSERT
                || (code >= CUDA_ERROR_HARDWARE_STACK_ERROR && code <= CUDA_ERROR_LAUNCH_FAILED);
    }

    /** One-line description of the code. */
    public static String description(int code) {
        String[] t = TEXT.get(code);
        return t != null ? t[1] : "unknown CUDA error " + code;
    }
}
