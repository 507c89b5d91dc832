package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiParam;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.api.WireCodec;
import io.gpusockets.protocol.images.ImageError;
import io.gpusockets.protocol.images.ModuleCode;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Restoring onto another GPU model (issue 22): a checkpoint image records each device's name and compute
 * capability ({@link #devices}); before a restore makes anything, {@link #check} reads the code each recorded module
 * and library image carries ({@link ModuleCode}: SASS architectures, PTX targets) and refuses the restore when a
 * device it would load on here can run none of it, naming the module, the code it carries, the device here and the
 * one it was checkpointed on. An image with PTX the device can JIT-compile passes, as does one whose code cannot be
 * told (the driver's load decides at the replay). A module loads on its context's device (the device of the
 * cuCtxCreate or cuDevicePrimaryCtxRetain record that made the context); a library, which loads in every context,
 * and a module whose context is not known are checked against every device the session made contexts on.
 */
final class RestoreModels {
    private static final int NAME_BYTES = 256;

    private RestoreModels() {
    }

    /** The host's devices, as a checkpoint image records them. */
    static List<CheckpointImage.DeviceModel> devices(DriverHost host) {
        List<CheckpointImage.DeviceModel> out = new ArrayList<>();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment name = a.allocate(NAME_BYTES);
            for (int d = 0; d < host.deviceCount(); d++) {
                name.fill((byte) 0);
                String n = host.driver().cuDeviceGetName(name, NAME_BYTES, d) == CuResult.CUDA_SUCCESS ? name.getString(0) : "";
                out.add(new CheckpointImage.DeviceModel(d, n, host.facts().capability(d)));
            }
        }
        return out;
    }

    /** Refuses the restore of {@code h} (from {@code file}) when a module's code cannot run on its device here. */
    static void check(CheckpointImage.Header h, DriverHost host, java.nio.file.Path file) throws CheckpointRefused {
        List<String> why = mismatches(h, host);
        if (!why.isEmpty()) {
            throw new CheckpointRefused("restore of session " + h.sessionId() + " from " + file + " refused: its modules"
                    + " carry no code this backend's GPU can run (no SASS of the device's major version and a minor not"
                    + " above it, no PTX of a target not above its compute capability): " + String.join("; ", why));
        }
    }

    /** What {@link #check} refuses, one line per module and device (empty: none). */
    static List<String> mismatches(CheckpointImage.Header h, DriverHost host) {
        ApiTable table = ApiTable.get();
        Map<Long, Integer> contextDevice = new HashMap<>();
        for (CheckpointRecorder.Record r : h.records()) {
            ApiFunction f = table.byOpcode(r.opcode);
            if (r.kind != CheckpointRecorder.Kind.MAKE || f == null || f.codec() != WireCodec.GENERIC || r.ids.length == 0) {
                continue;
            }
            ApiParam dev = input(f, ParamType.DEV);
            boolean makesContext = f.params().stream().anyMatch(p -> p.out() && p.type() == ParamType.CTX);
            if (dev != null && makesContext) {
                contextDevice.put(r.ids[0], (int) CheckpointRecorder.inputs(f, r.body)[dev.index()]);
            }
        }
        TreeSet<Integer> used = new TreeSet<>(contextDevice.values());
        if (used.isEmpty()) {
            used.add(0);
        }
        Map<Integer, CheckpointImage.DeviceModel> was = new HashMap<>();
        h.devices().forEach(d -> was.put(d.device(), d));
        List<CheckpointImage.DeviceModel> here = devices(host);
        List<String> out = new ArrayList<>();
        for (CheckpointRecorder.Record r : h.records()) {
            ApiFunction f = table.byOpcode(r.opcode);
            if (r.kind != CheckpointRecorder.Kind.MAKE || f == null || input(f, ParamType.IMAGE) == null || r.data.length == 0) {
                continue;
            }
            ModuleCode code;
            try {
                code = ModuleCode.of(MemorySegment.ofArray(r.data));
            } catch (ImageError e) {
                continue; // the driver's load says what it makes of it
            }
            boolean library = f.name().startsWith("cuLibrary");
            Integer own = library ? null : contextDevice.get(r.context);
            for (int d : own != null ? java.util.Set.of(own) : used) {
                if (d < 0 || d >= here.size() || code.runsOn(here.get(d).capability())) {
                    continue;
                }
                CheckpointImage.DeviceModel now = here.get(d), then = was.get(d);
                out.add((library ? "library " : "module ") + (r.ids.length > 0 ? r.ids[0] : 0) + " (" + f.name() + ", "
                        + r.data.length + " bytes) carries " + code.describe() + "; device " + d + " here is "
                        + model(now) + (then != null ? ", it was checkpointed on " + model(then) : ""));
            }
        }
        return out;
    }

    private static String model(CheckpointImage.DeviceModel d) {
        String cap = d.capability() < 0 ? "compute capability unknown" : "compute capability "
                + ModuleCode.capability(d.capability());
        return (d.name().isEmpty() ? "a GPU" : d.name()) + " (" + cap + ")";
    }

    private static ApiParam input(ApiFunction f, ParamType type) {
        for (ApiParam p : f.params()) {
            if (!p.out() && p.type() == type) {
                return p;
            }
        }
        return null;
    }
}
