package io.gpusockets.transport.unix;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalInt;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class UnixPeerUidTest {
    private static final OptionalInt OWN = OptionalInt.of(4242);

    @TempDir
    Path dir;
    private Path passwd;

    @BeforeEach
    void writePasswd() throws Exception {
        passwd = Files.writeString(dir.resolve("passwd"), """
                root:x:0:0:root:/root:/bin/bash
                broken line without fields
                alice:x:1000:1000:Alice:/home/alice:/bin/sh
                bob:x:notanumber:1001::/home/bob:/bin/sh
                huge:x:4294967294:1::/:/bin/false
                alice:x:2000:2000:second entry loses:/:/bin/sh
                """);
    }

    @Test
    void numericNameIsTheUidItself() {
        assertEquals(OptionalInt.of(1234), UnixPeerUid.resolve("1234", "me", OWN, passwd));
    }

    @Test
    void ownNameIsOwnUidWithoutReadingPasswd() {
        assertEquals(OWN, UnixPeerUid.resolve("me", "me", OWN, dir.resolve("missing")));
    }

    @Test
    void otherNamesComeFromTheFirstPasswdEntry() {
        assertEquals(OptionalInt.of(1000), UnixPeerUid.resolve("alice", "me", OWN, passwd));
        assertEquals(OptionalInt.of(0), UnixPeerUid.resolve("root", "me", OWN, passwd));
    }

    @Test
    void unknownMalformedOrOutOfRangeGiveNoUid() {
        assertEquals(OptionalInt.empty(), UnixPeerUid.resolve("carol", "me", OWN, passwd));
        assertEquals(OptionalInt.empty(), UnixPeerUid.resolve("bob", "me", OWN, passwd));
        assertEquals(OptionalInt.empty(), UnixPeerUid.resolve("huge", "me", OWN, passwd));
        assertEquals(OptionalInt.empty(), UnixPeerUid.resolve("4294967294", "me", OWN, passwd));
        assertEquals(OptionalInt.empty(), UnixPeerUid.resolve("alice", "me", OWN, dir.resolve("missing")));
    }

    @Test
    void ownNameWithoutAKnownOwnUidFallsBackToPasswd() {
        assertEquals(OptionalInt.of(1000), UnixPeerUid.resolve("alice", "alice", OptionalInt.empty(), passwd));
    }
}
