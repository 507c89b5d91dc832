package io.gpusockets.backend.status;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.UserPrincipal;
import java.util.List;
import java.util.Set;
import java.util.function.Function;
import jdk.net.UnixDomainPrincipal;

/**
 * Who may read the admin socket: root, the user the backend runs as, and, when an admin group is
 * configured, members of that group (as their primary group, or listed in it by the group database).
 * The peer's user and primary group come from the kernel (SO_PEERCRED), so a peer cannot claim them.
 * The socket file's mode (0600, or 0660 with the admin group) already keeps others out; this check
 * holds even where the file's mode is looser than intended.
 *
 * @param owner       the backend's own user
 * @param group       the admin group's name, or null for none
 * @param membersOf   the user names listed as members of a group (supplementary membership)
 */
public record AdminAccess(UserPrincipal owner, String group, Function<String, Set<String>> membersOf) {

    /** Null when {@code peer} may read status; else why not, for the refusal and the log. */
    public String refusal(UnixDomainPrincipal peer) {
        String user = peer.user().getName();
        if (user.equals("root") || user.equals("0") || user.equals(owner.getName())) {
            return null;
        }
        if (group != null && (peer.group().getName().equals(group) || membersOf.apply(group).contains(user))) {
            return null;
        }
        return "user " + user + " (group " + peer.group().getName() + ") is not root, not the backend's user "
                + owner.getName() + (group != null ? " and not in the admin group " + group : " and no --admin-group is set");
    }

    /** The members {@code /etc/group} lists for a group (none when the file or the group is missing). */
    public static Set<String> groupFileMembers(String group) {
        return groupMembers(Path.of("/etc/group"), group);
    }

    static Set<String> groupMembers(Path file, String group) {
        List<String> lines;
        try {
            lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        } catch (IOException e) {
            return Set.of();
        }
        for (String line : lines) {
            String[] f = line.split(":", -1);
            if (f.length >= 4 && f[0].equals(group)) {
                return java.util.Arrays.stream(f[3].split(",")).map(String::strip).filter(u -> !u.isEmpty())
                        .collect(java.util.stream.Collectors.toUnmodifiableSet());
            }
        }
        return Set.of();
    }
}
