package io.rdma4j.core.verbs;

import io.rdma4j.core.Access;

import java.util.Set;

/** Maps {@link Access} rights to {@code ibv_access_flags} for {@code ibv_reg_mr}. */
final class VerbsAccess {

    // Values of enum ibv_access_flags (verbs.h); VerbsAccessTest checks them against the generated bindings.
    static final int IBV_ACCESS_LOCAL_WRITE = 1;
    static final int IBV_ACCESS_REMOTE_WRITE = 1 << 1;
    static final int IBV_ACCESS_REMOTE_READ = 1 << 2;

    private VerbsAccess() {
    }

    /**
     * The flags for a region with {@code access} (already normalised by the transport). On iWARP the sink of
     * an RDMA READ is written by the peer's READ response as a remote write, so local-write regions also need
     * {@code IBV_ACCESS_REMOTE_WRITE} there (siw rejects the READ otherwise).
     */
    static int flags(Set<Access> access, boolean iwarp) {
        int flags = 0;
        if (access.contains(Access.LOCAL_WRITE)) {
            flags |= IBV_ACCESS_LOCAL_WRITE;
            if (iwarp) {
                flags |= IBV_ACCESS_REMOTE_WRITE;
            }
        }
        if (access.contains(Access.REMOTE_READ)) {
            flags |= IBV_ACCESS_REMOTE_READ;
        }
        if (access.contains(Access.REMOTE_WRITE)) {
            // the NIC refuses REMOTE_WRITE without LOCAL_WRITE (EINVAL)
            flags |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
        }
        return flags;
    }
}
