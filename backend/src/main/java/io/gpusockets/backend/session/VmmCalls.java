package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.structs.ArrayMapInfo;
import io.gpusockets.protocol.structs.MemoryProps;
import io.gpusockets.protocol.wire.ProtocolException;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;

/**
 * Area {@code vmm}: the virtual memory management API on the session's own objects ({@link SessionVmm}).
 * A map must lie inside a reservation of the session, without overlapping a mapping, and name a handle
 * the session holds; the mapped range is a session device range from the map until its unmap (adjacent
 * mappings form one span, {@link SessionMemory#MAPPING}). Only
 * pinned device memory is created (usages: none, a sparse arrays' tile pool, hardware decompression), with
 * requestedHandleTypes none, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR or CU_MEM_HANDLE_TYPE_FABRIC (the driver is asked
 * for a POSIX descriptor for either: a fabric handle of the backend's host would mean nothing to the program).
 *
 * <p>Shareable handles (issue 24 item 1) are served between sessions of one tenant, in every isolation mode, through
 * the backend's {@link ShareRegistry}: cuMemExportToShareableHandle (type POSIX_FILE_DESCRIPTOR or FABRIC, of an
 * allocation the session made with that type requested) exports the allocation as a POSIX descriptor, which the
 * registry keeps (in isolation {@code process} the worker sends it to the front with SCM_RIGHTS) until the exporting
 * session ends, and the program gets a 64-byte token (the frontend turns it into a descriptor of the guest);
 * cuMemImportFromShareableHandle of a token of the same tenant imports a duplicate of the descriptor into the
 * importer's driver: a handle of the importer's table, mappable in its reservations, NOT charged again (the exporter's
 * cuMemCreate is: the memory is charged once). A session holding an imported allocation, or whose export another
 * session imported, is refused a checkpoint, a migration and a hand-over of itself alone; with its partners it is
 * checkpointed, migrated and handed over together in isolation context and shared ({@link GroupCheckpoint}: the import
 * is made again from the restored export, not replayed). dma-buf handles stay refused.
 * cuMemMapArrayAsync binds a handle's memory to the session's sparse or deferred-mapping arrays, each entry
 * checked by {@link ArrayMaps}.
 *
 * <p>With address-stable memory ({@link StableAddresses}) a reservation lies inside the session's address window of
 * the current context's device ({@link StableAddresses#reserveInWindow}), and how each reservation, allocation and
 * access setting was made is kept ({@link SessionVmm}) for a checkpoint ({@link CheckpointVmm}); where the device can
 * export memory as POSIX descriptors the driver is asked for exportable allocations (the program neither asks for nor
 * sees that handle type), so that a hand-over to another backend process on the GPU maps them there, and that
 * hand-over's restore replays each {@code cuMemCreate} by taking the allocation it imported
 * ({@link StableAddresses#takeProgramAllocation}).
 */
final class VmmCalls implements BackendHandlers.Vmm {
    /** CU_MEM_HANDLE_TYPE_FABRIC: served as a POSIX descriptor of the backend's host behind the token. */
    static final int HANDLE_TYPE_FABRIC = 0x8;
    /** The requestedHandleTypes a program may ask for ({@link ShareRegistry}). */
    static final int SHAREABLE_TYPES = MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | HANDLE_TYPE_FABRIC;

    private final Session session;
    private final CudaDriver driver;
    private final SessionVmm vmm;

    VmmCalls(Session session) {
        this.session = session;
        this.driver = session.driver();
        this.vmm = session.vmm();
    }

    private MemorySegment allocationProp(Call c, long length) throws ProtocolException, CallRejected, InterruptedException {
        if (length != MemoryProps.ALLOCATION_PROP_SIZE) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "prop of " + length + " bytes");
        }
        MemorySegment prop = c.receiveBulk(length);
        String refusal = MemoryProps.allocationRefusal(prop, session.host().deviceCount(),
                MemoryProps.USAGE_TILE_POOL | MemoryProps.USAGE_HW_DECOMPRESS, SHAREABLE_TYPES);
        if (refusal != null) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, refusal);
        }
        if (!MemoryProps.validDevice(prop, session.host().deviceCount())) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_DEVICE, "location.id is no device");
        }
        return prop;
    }

    @Override
    public int cuMemGetAllocationGranularity(Call c, long propLength, int option)
            throws ProtocolException, CallRejected, InterruptedException {
        MemorySegment prop = allocationProp(c, propLength);
        MemorySegment out = c.scratch(8);
        int r = driver.cuMemGetAllocationGranularity(out, forDriver(prop), option);
        if (r == CuResult.CUDA_SUCCESS) {
            c.outs.putLong(out.get(ValueLayout.JAVA_LONG, 0));
        }
        return r;
    }

    @Override
    public int cuMemCreate(Call c, long size, long propLength, long flags)
            throws ProtocolException, CallRejected, InterruptedException {
        MemorySegment prop = allocationProp(c, propLength);
        MemorySegment out = c.scratch(8);
        StableAddresses stable = session.stable();
        long handed = -1;
        if (stable != null) {
            try {
                handed = stable.takeProgramAllocation(size);
            } catch (IllegalStateException e) {
                throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, e.getMessage());
            }
        }
        try {
            session.quota().reserve(size, "cuMemCreate");
        } catch (CallRejected | RuntimeException e) {
            if (handed > 0) {
                driver.cuMemRelease(handed);
            }
            throw e;
        }
        int r = CuResult.CUDA_ERROR_UNKNOWN;
        try {
            if (handed > 0) {
                out.set(ValueLayout.JAVA_LONG, 0, handed); // a hand-over's restore: the source's allocation, imported
                r = CuResult.CUDA_SUCCESS;
            } else {
                MemorySegment driverProp = forDriver(prop);
                MemorySegment asked = exportable(stable, driverProp);
                r = driver.cuMemCreate(out, size, asked, flags);
                if (asked != driverProp && stable.refusedExportable(r, MemoryProps.Location.read(prop, MemoryProps.LOCATION).id())) {
                    r = driver.cuMemCreate(out, size, driverProp, flags); // as the program asked
                }
            }
        } finally {
            if (r != CuResult.CUDA_SUCCESS) {
                session.quota().unreserve(size);
            }
        }
        if (r == CuResult.CUDA_SUCCESS) {
            long real = out.get(ValueLayout.JAVA_LONG, 0);
            session.quota().vmmCreated(real, size);
            vmm.created(real, size);
            vmm.made(real, prop.asSlice(0, MemoryProps.ALLOCATION_PROP_SIZE).toArray(ValueLayout.JAVA_BYTE), flags,
                    session.currentContextId(c.lane));
            c.outs.putLong(session.handles().intern(ParamType.MEMH, real, 0, 0));
        }
        return r;
    }

    /** The program's properties with CU_MEM_HANDLE_TYPE_FABRIC asked of the driver as a POSIX descriptor. */
    private static MemorySegment forDriver(MemorySegment prop) {
        int types = prop.get(ValueLayout.JAVA_INT_UNALIGNED, MemoryProps.HANDLE_TYPES);
        if ((types & HANDLE_TYPE_FABRIC) == 0) {
            return prop;
        }
        MemorySegment n = java.lang.foreign.Arena.ofAuto().allocate(MemoryProps.ALLOCATION_PROP_SIZE, 8)
                .copyFrom(prop.asSlice(0, MemoryProps.ALLOCATION_PROP_SIZE));
        n.set(ValueLayout.JAVA_INT_UNALIGNED, MemoryProps.HANDLE_TYPES,
                (types & ~HANDLE_TYPE_FABRIC) | MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        return n;
    }

    /**
     * The properties the driver is given: the program's, with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR requested when
     * the session has address-stable memory and the device can export (so that a hand-over to another backend process
     * on the GPU maps the allocation instead of copying it); the program never sees the bit
     * ({@link #cuMemGetAllocationPropertiesFromHandle}) and cannot ask for it.
     */
    private static MemorySegment exportable(StableAddresses stable, MemorySegment prop) {
        if (stable == null || !exportableUsage(prop)
                || !stable.exportable(MemoryProps.Location.read(prop, MemoryProps.LOCATION).id())) {
            return prop;
        }
        MemorySegment n = java.lang.foreign.Arena.ofAuto().allocate(MemoryProps.ALLOCATION_PROP_SIZE, 8)
                .copyFrom(prop.asSlice(0, MemoryProps.ALLOCATION_PROP_SIZE));
        n.set(ValueLayout.JAVA_INT_UNALIGNED, MemoryProps.HANDLE_TYPES, MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        return n;
    }

    /**
     * Whether an allocation of these properties is made exportable: plain memory only (no allocFlags usage, no
     * compression: a tile pool or decompression memory stays as the program asked, and a hand-over copies it).
     */
    static boolean exportableUsage(MemorySegment prop) {
        return prop.get(ValueLayout.JAVA_BYTE, MemoryProps.ALLOC_COMPRESSION) == 0
                && prop.get(ValueLayout.JAVA_SHORT_UNALIGNED, MemoryProps.ALLOC_USAGE) == 0;
    }

    /** One of the session's references goes; with the last, the handle id stops naming it. */
    @Override
    public int cuMemRelease(Call c, long handle) throws CallRejected {
        if (!vmm.holds(handle)) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "the session holds no reference to this handle");
        }
        int r = driver.cuMemRelease(handle);
        if (r == CuResult.CUDA_SUCCESS && vmm.unreferenced(handle) == 0) {
            session.dropHandle(session.handles().idOf(ParamType.MEMH, handle));
            if (vmm.gone(handle)) {
                session.quota().vmmFreed(handle); // the driver frees it with the last reference, mapping and array binding
                session.vmmGone(handle);
            }
        }
        return r;
    }

    @Override
    public int cuMemAddressReserve(Call c, long size, long alignment, long addr, long flags) throws CallRejected {
        StableAddresses stable = session.stable();
        if (stable != null) {
            if (flags != 0) {
                throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "flags=" + flags + " (must be 0)");
            }
            MemorySegment dev = c.scratch(8);
            if (driver.cuCtxGetDevice(dev) != CuResult.CUDA_SUCCESS) {
                throw new CallRejected(CuResult.CUDA_ERROR_INVALID_CONTEXT, "a reservation lies in the session's address"
                        + " window of the current context's device, and no context is current");
            }
            int device = dev.get(ValueLayout.JAVA_INT, 0);
            long base = stable.reserveInWindow(device, size, alignment, addr);
            if (base == 0) {
                String why = stable.placeFailure();
                throw new CallRejected(why != null && why.startsWith("no free range") ? CuResult.CUDA_ERROR_OUT_OF_MEMORY
                        : CuResult.CUDA_ERROR_INVALID_VALUE, why == null ? "no room in the address window" : why);
            }
            vmm.reserved(base, size, device, session.currentContextId(c.lane));
            c.outs.putLong(base);
            return CuResult.CUDA_SUCCESS;
        }
        MemorySegment out = c.scratch(8);
        int r = driver.cuMemAddressReserve(out, size, alignment, addr, flags);
        if (r == CuResult.CUDA_SUCCESS) {
            long base = out.get(ValueLayout.JAVA_LONG, 0);
            vmm.reserved(base, size);
            c.outs.putLong(base);
        }
        return r;
    }

    @Override
    public int cuMemAddressFree(Call c, long ptr, long size) throws CallRejected {
        SessionVmm.Reservation res = vmm.reservationAt(ptr, size);
        if (res == null) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, String.format("0x%x+%d is no reservation of this session", ptr, size));
        }
        if (vmm.overlapsMapping(res, ptr, size)) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "the reservation still has mappings: unmap them first");
        }
        int r = driver.cuMemAddressFree(ptr, size);
        if (r == CuResult.CUDA_SUCCESS) {
            vmm.freed(res);
        }
        return r;
    }

    @Override
    public int cuMemMap(Call c, long ptr, long size, long offset, long handle, long flags) throws CallRejected {
        SessionVmm.Reservation res = vmm.reservationHolding(ptr, size);
        if (res == null) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, String.format("0x%x+%d is not inside a reservation of this session", ptr, size));
        }
        if (!vmm.holds(handle)) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_HANDLE, "the session holds no reference to this handle");
        }
        if (vmm.overlapsMapping(res, ptr, size)) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "the range overlaps a mapping");
        }
        int r = driver.cuMemMap(ptr, size, offset, handle, flags);
        if (r == CuResult.CUDA_SUCCESS) {
            vmm.mapped(res, new SessionVmm.Mapping(ptr, size, handle, offset));
            session.memory().add(new SessionMemory.Range(ptr, size, SessionMemory.MAPPING, false));
        }
        return r;
    }

    @Override
    public int cuMemUnmap(Call c, long ptr, long size) throws CallRejected, InterruptedException {
        SessionVmm.Reservation res = vmm.reservationHolding(ptr, size);
        List<SessionVmm.Mapping> ms = res == null ? null : vmm.mappingsCovering(res, ptr, size);
        if (ms == null) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, String.format("0x%x+%d is not a union of whole mappings of this session", ptr, size));
        }
        // no call of another lane is inside the driver with these mappings while they go
        try (SessionUses.Retirement retiring = c.retire(new long[0], ms.stream().mapToLong(SessionVmm.Mapping::base).toArray())) {
            int r = driver.cuMemUnmap(ptr, size);
            if (r == CuResult.CUDA_SUCCESS) {
                retiring.commit();
                vmm.unmapped(res, ms);
                for (SessionVmm.Mapping m : ms) {
                    session.memory().remove(m.base());
                    if (vmm.gone(m.handle())) {
                        session.quota().vmmFreed(m.handle()); // its last mapping, after its last reference and binding
                        session.vmmGone(m.handle());
                    }
                }
            }
            return r;
        }
    }

    /**
     * The list's length as announced; its entries follow as DATA. Every entry is checked and its handles
     * translated ({@link ArrayMaps}) before the driver sees any; after the driver's success each map's
     * allocation is held by its array until the array goes ({@link SessionVmm#bound}).
     */
    @Override
    public int cuMemMapArrayAsync(Call c, long mapInfoListLength, int count, long hStream)
            throws ProtocolException, CallRejected, InterruptedException {
        if (count < 0 || count > ArrayMapInfo.MAX_COUNT || mapInfoListLength != (long) count * ArrayMapInfo.SIZE) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "count=" + Integer.toUnsignedString(count) + " with "
                    + mapInfoListLength + " bytes (at most " + ArrayMapInfo.MAX_COUNT + " entries)");
        }
        if (count == 0) {
            return driver.cuMemMapArrayAsync(MemorySegment.NULL, 0, hStream);
        }
        MemorySegment list = c.receiveBulk(mapInfoListLength);
        ArrayMaps maps = new ArrayMaps(c, driver, vmm, session.host().deviceCount());
        List<ArrayMaps.Checked> checked = new java.util.ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            checked.add(maps.checkFields(list, i));
        }
        List<ArrayMaps.Binding> bindings = new java.util.ArrayList<>();
        for (ArrayMaps.Checked k : checked) {
            ArrayMaps.Binding b = maps.checkBytes(k);
            if (b != null) {
                bindings.add(b);
            }
        }
        int r = driver.cuMemMapArrayAsync(list, count, hStream);
        if (r == CuResult.CUDA_SUCCESS) {
            for (ArrayMaps.Binding b : bindings) {
                vmm.bound(b.handle(), b.resource());
            }
        }
        return r;
    }

    @Override
    public int cuMemSetAccess(Call c, long ptr, long size, long descLength, long count)
            throws ProtocolException, CallRejected, InterruptedException {
        if (count <= 0 || count > PoolCalls.MAX_ACCESS_DESCS || descLength != count * MemoryProps.ACCESS_DESC_SIZE) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "count=" + count + " with " + descLength + " bytes");
        }
        if (vmm.reservationHolding(ptr, size) == null) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, String.format("0x%x+%d is not inside a reservation of this session", ptr, size));
        }
        MemorySegment desc = c.receiveBulk(descLength);
        PoolCalls.checkAccessDescs(desc, count, session.host().deviceCount());
        int r = driver.cuMemSetAccess(ptr, size, desc, count);
        if (r == CuResult.CUDA_SUCCESS) {
            MemorySegment dev = c.scratch(8);
            int device = driver.cuCtxGetDevice(dev) == CuResult.CUDA_SUCCESS ? dev.get(ValueLayout.JAVA_INT, 0) : -1;
            vmm.accessSet(ptr, size, desc.asSlice(0, descLength).toArray(ValueLayout.JAVA_BYTE),
                    session.currentContextId(c.lane), device);
        }
        return r;
    }

    @Override
    public int cuMemGetAccess(Call c, long locationLength, long ptr) throws ProtocolException, CallRejected, InterruptedException {
        MemorySegment location = PoolCalls.locationBytes(c, locationLength, session.host().deviceCount());
        if (vmm.reservationHolding(ptr, 1) == null) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, String.format("0x%x is not inside a reservation of this session", ptr));
        }
        MemorySegment flags = c.scratch(8);
        int r = driver.cuMemGetAccess(flags, location, ptr);
        if (r == CuResult.CUDA_SUCCESS) {
            c.outs.putLong(flags.get(ValueLayout.JAVA_LONG, 0));
        }
        return r;
    }

    /** The address must lie in a mapping of the session; the new reference is the session's to release. */
    @Override
    public int cuMemRetainAllocationHandle(Call c, long addr) throws CallRejected {
        SessionVmm.Mapping m = vmm.mappingAt(addr);
        if (m == null) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, String.format("0x%x is in no mapping of this session", addr));
        }
        MemorySegment out = c.scratch(8);
        int r = driver.cuMemRetainAllocationHandle(out, addr);
        if (r == CuResult.CUDA_SUCCESS) {
            long real = out.get(ValueLayout.JAVA_LONG, 0);
            vmm.referenced(real);
            c.outs.putLong(session.handles().intern(ParamType.MEMH, real, 0, 0));
        }
        return r;
    }

    @Override
    public int cuMemGetAllocationPropertiesFromHandle(Call c, long handle) throws IOException {
        MemorySegment prop = c.scratch(MemoryProps.ALLOCATION_PROP_SIZE);
        int r = driver.cuMemGetAllocationPropertiesFromHandle(prop, handle);
        if (r == CuResult.CUDA_SUCCESS) {
            prop.set(ValueLayout.JAVA_LONG_UNALIGNED, MemoryProps.WIN32, 0); // a host pointer of the backend: never sent
            // the types the program asked for (the POSIX type the backend asks for itself, for a hand-over, is not shown)
            SessionVmm.Made made = vmm.madeOf(handle);
            int types = made != null ? java.nio.ByteBuffer.wrap(made.prop()).order(java.nio.ByteOrder.LITTLE_ENDIAN)
                    .getInt((int) MemoryProps.HANDLE_TYPES) & SHAREABLE_TYPES
                    : session.sharing().imported(handle) ? MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : MemoryProps.HANDLE_TYPE_NONE;
            prop.set(ValueLayout.JAVA_INT_UNALIGNED, MemoryProps.HANDLE_TYPES, types);
            c.sendData(prop.asSlice(0, MemoryProps.ALLOCATION_PROP_SIZE));
        }
        return r;
    }

    /**
     * Exports an allocation the session made with the type requested: the driver's POSIX descriptor goes to the
     * registry (the front's, over the control socket in isolation process) and the program gets the token.
     */
    @Override
    public int cuMemExportToShareableHandle(Call c, long handle, int handleType, long flags) throws CallRejected, IOException {
        if (handleType != MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR && handleType != HANDLE_TYPE_FABRIC) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "handleType=" + handleType + " (served:"
                    + " CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR and CU_MEM_HANDLE_TYPE_FABRIC, between sessions of one tenant)");
        }
        if (flags != 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "flags=" + flags + " (must be 0)");
        }
        if (!vmm.holds(handle)) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "the session holds no reference to this handle");
        }
        SessionVmm.Made made = vmm.madeOf(handle);
        int requested = made == null ? 0 : java.nio.ByteBuffer.wrap(made.prop()).order(java.nio.ByteOrder.LITTLE_ENDIAN)
                .getInt((int) MemoryProps.HANDLE_TYPES);
        if ((requested & handleType) == 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, made == null
                    ? "an imported allocation cannot be exported again: export the exporter's"
                    : "the allocation was not created with handleType " + handleType + " in requestedHandleTypes");
        }
        MemorySegment fd = c.scratch(8);
        int r = driver.cuMemExportToShareableHandle(fd, handle, MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        byte[] token;
        try {
            token = session.shares().share(ShareRegistry.KIND_VMM, null, vmm.sizeOf(handle), fd.get(ValueLayout.JAVA_INT, 0),
                    handle);
            session.sharing().exported(ShareRegistry.KIND_VMM, handle);
        } catch (ShareRegistry.Refused e) {
            throw new CallRejected(e.result(), e.getMessage());
        }
        c.sendData(MemorySegment.ofArray(token));
        return r;
    }

    /**
     * Imports the allocation a token of the same tenant names: the driver imports a duplicate of the registry's
     * descriptor (closed here after), and the handle is the session's, held as one it made (mappable, released by
     * cuMemRelease) but not charged.
     */
    @Override
    public int cuMemImportFromShareableHandle(Call c, long osHandle, int shHandleType)
            throws ProtocolException, CallRejected, InterruptedException {
        if (osHandle != ShareRegistry.TOKEN_BYTES) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "osHandle of " + osHandle + " bytes");
        }
        byte[] token = c.receiveBulk(osHandle).asSlice(0, osHandle).toArray(ValueLayout.JAVA_BYTE);
        if (shHandleType != MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR && shHandleType != HANDLE_TYPE_FABRIC) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "shHandleType=" + shHandleType + " (served:"
                    + " CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR and CU_MEM_HANDLE_TYPE_FABRIC, between sessions of one tenant)");
        }
        ShareRegistry.Found f;
        try {
            f = session.shares().lookup(ShareRegistry.KIND_VMM, token);
        } catch (ShareRegistry.Refused e) {
            throw new CallRejected(e.result(), e.getMessage());
        }
        MemorySegment out = c.scratch(8);
        int r;
        try {
            r = driver.cuMemImportFromShareableHandle(out, MemorySegment.ofAddress(f.fd()),
                    MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        } finally {
            io.gpusockets.transport.vsock.DescriptorPassing.close(f.fd());
        }
        if (r == CuResult.CUDA_SUCCESS) {
            long real = out.get(ValueLayout.JAVA_LONG, 0);
            if (vmm.holds(real)) { // an allocation the session holds already (its own export): one more reference
                vmm.referenced(real);
            } else {
                vmm.created(real, f.size()); // not charged: the exporter's cuMemCreate is
                if (f.exporter() != session.id()) {
                    session.sharing().vmmImported(real, token);
                }
            }
            c.outs.putLong(session.handles().intern(ParamType.MEMH, real, 0, 0));
        }
        return r;
    }

    @Override
    public int cuMemGetHandleForAddressRange(Call c, long dptr, long size, int handleType, long flags) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "dma-buf handles name objects of the backend's host and cannot cross machines");
    }
}
