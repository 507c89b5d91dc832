package io.gpusockets.protocol.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * Every public function of cuda.h 13.0 is accounted for exactly once: forwarded (an entry of
 * cuda-driver.api), hand-written in libcuda.so.1's C, or listed in not-forwarded.api with its reason.
 * Prints the coverage (forwarded / public).
 */
class CoverageTest {
    private static String resource(String name) throws IOException {
        try (InputStream in = CoverageTest.class.getResourceAsStream(name)) {
            assertTrue(in != null, () -> "no resource " + name);
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    @Test
    void everyPublicFunctionIsForwardedHandWrittenOrListedWithAReason() throws IOException {
        Map<String, String> cudaH = NotForwarded.parseCudaH(resource(NotForwarded.CUDA_H_RESOURCE));
        assertEquals(449, cudaH.size(), "cuda.h 13.0 declares 449 public functions");
        List<NotForwarded.Entry> notForwarded = NotForwarded.parse(resource(NotForwarded.RESOURCE));
        // An entry covers a public name when it is named so, serves it (an ABI variant of its own, e.g.
        // cuCtxCreate_v2), or is named or exports the ABI symbol cuda.h maps the name to
        // (cuGraphInstantiate -> cuGraphInstantiateWithFlags).
        Map<String, String> byAbi = new java.util.HashMap<>();
        cudaH.forEach((name, abi) -> byAbi.put(abi, name));
        Set<String> forwarded = new TreeSet<>();
        List<String> strays = new ArrayList<>();
        for (ApiFunction f : ApiTable.get().functions()) {
            List<String> candidates = new ArrayList<>(List.of(f.name(), f.serves()));
            candidates.addAll(f.symbols());
            String covered = null;
            for (String c : candidates) {
                covered = cudaH.containsKey(c) ? c : byAbi.get(c);
                if (covered != null) {
                    break;
                }
            }
            if (covered == null) {
                strays.add(f.name());
            } else {
                forwarded.add(covered);
            }
        }
        List<String> problems = new ArrayList<>();
        Set<String> listed = new TreeSet<>();
        for (NotForwarded.Entry e : notForwarded) {
            listed.add(e.name());
            if (!cudaH.containsKey(e.name())) {
                problems.add(e.name() + ": in not-forwarded.api but not a public function of cuda.h 13.0");
            }
            if (forwarded.contains(e.name())) {
                problems.add(e.name() + ": both forwarded and listed as not forwarded");
            }
            if (e.reason().length() < 12) {
                problems.add(e.name() + ": the reason says too little: " + e.reason());
            }
        }
        for (String name : strays) {
            problems.add(name + ": a table entry that is no public function of cuda.h 13.0 nor an ABI variant of one");
        }
        for (String name : cudaH.keySet()) {
            int places = (forwarded.contains(name) ? 1 : 0) + (listed.contains(name) ? 1 : 0)
                    + (NotForwarded.HAND_WRITTEN_IN_C.contains(name) ? 1 : 0);
            if (places == 0) {
                problems.add(name + ": neither forwarded, hand-written nor listed in not-forwarded.api");
            }
        }
        assertTrue(problems.isEmpty(), () -> problems.size() + " problem(s):\n" + String.join("\n", problems));
        System.out.printf("coverage: %d of %d public cuda.h 13.0 functions forwarded, %d hand-written in C, %d not forwarded%n",
                forwarded.size(), cudaH.size(), NotForwarded.HAND_WRITTEN_IN_C.size(), listed.size());
    }

    @Test
    void malformedLinesAreRefused() {
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> NotForwarded.parse("cuIpcGetMemHandle NOT_AN_ERROR because"));
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> NotForwarded.parse("cuIpcGetMemHandle CUDA_ERROR_NO_SUCH_THING because"));
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> NotForwarded.parse("cuA CUDA_ERROR_NOT_SUPPORTED one reason\ncuA CUDA_ERROR_NOT_SUPPORTED twice"));
        assertEquals(801, NotForwarded.parse("cuA CUDA_ERROR_NOT_SUPPORTED a reason long enough").getFirst().code());
    }
}
