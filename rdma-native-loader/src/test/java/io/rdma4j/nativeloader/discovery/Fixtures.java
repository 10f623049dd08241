package io.rdma4j.nativeloader.discovery;

import java.net.URISyntaxException;
import java.nio.file.Path;

/** Fixture sysfs roots under src/test/resources/sysfs (see the README there). */
final class Fixtures {

    private Fixtures() {
    }

    static Path root(String host) {
        try {
            return Path.of(Fixtures.class.getResource("/sysfs/" + host).toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    static SysfsScanner.Snapshot scan(String host) {
        return new SysfsScanner(root(host)).scan();
    }
}
