package io.gpusockets.protocol.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.lang.classfile.ClassFile;
import java.lang.classfile.ClassModel;
import java.lang.classfile.MethodModel;
import java.lang.classfile.attribute.CodeAttribute;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.Proxy;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** The backend's generic dispatch: every entry reaches its method, and no method is too large for the JIT. */
class ApiInvokerTest {
    /** HotSpot's HugeMethodLimit: a method with more bytecode is never compiled (DontCompileHugeMethods). */
    private static final int HUGE_METHOD_LIMIT = 8000;

    @Test
    void everyMethodIsSmallEnoughForTheJitToCompile() throws Exception {
        ClassModel model;
        try (InputStream in = ApiInvoker.class.getResourceAsStream("ApiInvoker.class")) {
            model = ClassFile.of().parse(in.readAllBytes());
        }
        int invokers = 0;
        for (MethodModel m : model.methods()) {
            int length = m.findAttribute(java.lang.classfile.Attributes.code()).map(CodeAttribute::codeLength).orElse(0);
            assertTrue(length < HUGE_METHOD_LIMIT, m.methodName().stringValue() + " has " + length + " bytes of bytecode");
            if (m.methodName().stringValue().startsWith("invoke")) {
                invokers++;
            }
        }
        assertTrue(invokers > 1, "the entries are split over several methods: " + invokers);
    }

    @Test
    void everyEntryReachesItsOwnMethod() {
        AtomicReference<String> called = new AtomicReference<>();
        CudaDriver d = (CudaDriver) Proxy.newProxyInstance(CudaDriver.class.getClassLoader(), new Class<?>[] {CudaDriver.class},
                (proxy, method, args) -> {
                    called.set(method.getName());
                    return 0;
                });
        for (ApiFunction f : ApiTable.get().functions()) {
            Object[] args = new Object[f.params().size()];
            for (int i = 0; i < args.length; i++) {
                ApiParam p = f.params().get(i);
                args[i] = p.out() ? MemorySegment.NULL : switch (p.type().javaType()) {
                    case "int" -> 0;
                    case "long" -> 0L;
                    case "byte" -> (byte) 0;
                    case "short" -> (short) 0;
                    case "float" -> 0f;
                    default -> MemorySegment.NULL;
                };
            }
            called.set(null);
            assertEquals(0, ApiInvoker.invoke(d, f.index(), args), f.name());
            assertEquals(f.name(), called.get(), "entry " + f.index());
        }
        assertThrows(IllegalArgumentException.class, () -> ApiInvoker.invoke(d, -1, new Object[0]));
        assertThrows(IllegalArgumentException.class, () -> ApiInvoker.invoke(d, ApiTable.get().functions().size(), new Object[0]));
    }
}
