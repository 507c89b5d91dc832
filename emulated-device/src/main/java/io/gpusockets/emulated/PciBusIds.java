package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;

import java.util.HexFormat;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * PCI addresses of the emulated devices: device {@code n} sits at domain 0, bus {@code n}, device 0,
 * function 0 (the bus number is what CU_DEVICE_ATTRIBUTE_PCI_BUS_ID answers), printed as the driver
 * prints them, {@code 0000:00:00.0}. Parsing accepts the three forms cuDeviceGetByPCIBusId documents,
 * {@code domain:bus:device.function}, {@code domain:bus:device} and {@code bus:device.function}, in
 * hexadecimal of either case, as the real driver does.
 */
final class PciBusIds {
    /** Characters the driver writes, NUL included: "0000:00:00.0". */
    static final int LENGTH_WITH_NUL = 13;

    private static final Pattern FORM = Pattern.compile(
            "(?:(\\p{XDigit}{1,8}):)?(\\p{XDigit}{1,2}):(\\p{XDigit}{1,2})(?:\\.(\\p{XDigit}))?");

    private PciBusIds() {
    }

    static String of(int ordinal) {
        return String.format("%04X:%02X:%02X.0", 0, ordinal, 0);
    }

    /**
     * The ordinal of the device at {@code id}, or -1 when no device of {@code deviceCount} is there.
     *
     * @throws CudaError CUDA_ERROR_INVALID_VALUE when {@code id} is in none of the accepted forms
     */
    static int ordinal(String id, int deviceCount) {
        Matcher m = FORM.matcher(id);
        // Without a domain the function is required ("bus:device.function"), as documented.
        if (!m.matches() || (m.group(1) == null && m.group(4) == null)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "pciBusId \"" + id + "\" is not [domain]:[bus]:[device].[function]");
        }
        long domain = m.group(1) == null ? 0 : HexFormat.fromHexDigitsToLong(m.group(1));
        int bus = HexFormat.fromHexDigits(m.group(2));
        int device = HexFormat.fromHexDigits(m.group(3));
        int function = m.group(4) == null ? 0 : HexFormat.fromHexDigits(m.group(4));
        return domain == 0 && device == 0 && function == 0 && bus < deviceCount ? bus : -1;
    }
}
