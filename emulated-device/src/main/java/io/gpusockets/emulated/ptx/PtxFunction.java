package io.gpusockets.emulated.ptx;

import java.util.List;

/**
 * A {@code .func} of the module, for the interpreter: its return and parameter lists and its body
 * text (braces included) with the PTX line the body starts on.
 */
public record PtxFunction(String name, List<Param> returns, List<Param> params, String body, int line) {
    /** One {@code .param} of a function: name, bytes, alignment. */
    public record Param(String name, long size, long alignment) {
    }
}
