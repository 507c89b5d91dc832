package io.gpusockets.backend.session;

/** A call refused by validation before it reached the driver; carries the CUresult to answer. */
final class CallRejected extends Exception {
    final int result;

    CallRejected(int result, String why) {
        super(why, null, false, false);
        this.result = result;
    }
}
