package io.gpusockets.e2e;

import io.gpusockets.frontend.RemoteCudaDriver;

/** A client that takes GPU resources and then waits to be killed (EndToEndTest kills it with SIGKILL). */
public final class VanishingClient {
    public static void main(String[] args) throws Exception {
        RemoteCudaDriver d = RemoteCudaDriver.connect(args[0]);
        Cuda cu = new Cuda(d);
        cu.primaryContext();
        cu.alloc(3 << 20);
        cu.stream();
        System.out.println("session " + d.sessionId());
        System.out.flush();
        Thread.sleep(60_000);
    }
}
