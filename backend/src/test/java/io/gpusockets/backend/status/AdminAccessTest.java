package io.gpusockets.backend.status;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.GroupPrincipal;
import java.nio.file.attribute.UserPrincipal;
import java.util.Set;
import jdk.net.UnixDomainPrincipal;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The admin socket's credential check, with made-up peers (the tests run as one user). */
class AdminAccessTest {
    private record User(String getName) implements UserPrincipal {
    }

    private record Group(String getName) implements GroupPrincipal {
    }

    private static UnixDomainPrincipal peer(String user, String group) {
        return new UnixDomainPrincipal(new User(user), new Group(group));
    }

    private static final AdminAccess NO_GROUP = new AdminAccess(new User("gpusockets"), null, g -> Set.of());
    private static final AdminAccess WITH_GROUP = new AdminAccess(new User("gpusockets"), "gpuadmin",
            g -> g.equals("gpuadmin") ? Set.of("carol") : Set.of());

    @Test
    void rootAndTheBackendsOwnUserAreAllowed() {
        assertNull(NO_GROUP.refusal(peer("root", "root")));
        assertNull(NO_GROUP.refusal(peer("gpusockets", "users")));
        assertNull(WITH_GROUP.refusal(peer("root", "wheel")));
    }

    @Test
    void anyOtherUserIsRefusedWhenNoGroupIsConfigured() {
        String why = NO_GROUP.refusal(peer("mallory", "gpuadmin"));
        assertNotNull(why, "a group only counts when configured");
        assertTrue(why.contains("mallory") && why.contains("no --admin-group"), why);
    }

    @Test
    void membersOfTheAdminGroupAreAllowedAndOthersRefused() {
        assertNull(WITH_GROUP.refusal(peer("bob", "gpuadmin")), "primary group");
        assertNull(WITH_GROUP.refusal(peer("carol", "users")), "listed as a member");
        String why = WITH_GROUP.refusal(peer("mallory", "users"));
        assertNotNull(why);
        assertTrue(why.contains("mallory") && why.contains("gpuadmin"), why);
    }

    @Test
    void readsGroupMembersFromAGroupFile(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("group");
        Files.writeString(f, "root:x:0:\ngpuadmin:x:990:alice, bob,alice\nother:x:991:carol\n");
        assertEquals(Set.of("alice", "bob"), AdminAccess.groupMembers(f, "gpuadmin"));
        assertEquals(Set.of(), AdminAccess.groupMembers(f, "root"));
        assertEquals(Set.of(), AdminAccess.groupMembers(f, "missing"));
        assertEquals(Set.of(), AdminAccess.groupMembers(dir.resolve("absent"), "gpuadmin"));
    }
}
