package io.rdma4j.nativeloader.discovery;

import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class GidTest {

    static Gid gid(String sysfs) {
        return Gid.parse(0, sysfs, GidType.ROCE_V2, Optional.empty());
    }

    @Test
    void ipv4MappedGid() throws Exception {
        Gid g = gid("0000:0000:0000:0000:0000:ffff:0a09:0901");
        assertThat(g.address()).isEqualTo("::ffff:10.9.9.1");
        assertThat(g.ipv4()).contains((java.net.Inet4Address) InetAddress.getByName("10.9.9.1"));
        assertThat(g.matches(InetAddress.getByName("10.9.9.1"))).isTrue();
        assertThat(g.matches(InetAddress.getByName("10.9.9.2"))).isFalse();
        assertThat(g.isLinkLocal()).isFalse();
        assertThat(g.isZero()).isFalse();
    }

    @Test
    void linkLocalAndIpv6Gids() throws Exception {
        Gid ll = gid("fe80:0000:0000:0000:b859:9fff:fe12:3456");
        assertThat(ll.address()).isEqualTo("fe80::b859:9fff:fe12:3456");
        assertThat(ll.isLinkLocal()).isTrue();
        assertThat(ll.ipv4()).isEmpty();
        Gid v6 = gid("2001:0db8:0000:0000:0000:0000:0000:0005");
        assertThat(v6.address()).isEqualTo("2001:db8::5");
        assertThat(v6.matches(InetAddress.getByName("2001:db8::5"))).isTrue();
        assertThat(v6.matches(InetAddress.getByName("2001:db8::6"))).isFalse();
        // a single zero word is not compressed (RFC 5952)
        assertThat(gid("2001:0db8:0000:0001:0001:0001:0001:0001").address()).isEqualTo("2001:db8:0:1:1:1:1:1");
        assertThat(gid("0000:0000:0000:0000:0000:0000:0000:0000").isZero()).isTrue();
    }

    @Test
    void iwarpGidCarriesTheMac() {
        assertThat(gid("0007:433a:5e60:0000:0000:0000:0000:0000").macPrefix()).isEqualTo("00:07:43:3a:5e:60");
    }

    @Test
    void sysfsTextOfAnEmptyEntryIsZeroAndAnyOtherIsNot() {
        assertThat(Gid.isZero("0000:0000:0000:0000:0000:0000:0000:0000\n")).isTrue();
        assertThat(Gid.isZero("0000:0000:0000:0000:0000:ffff:0a09:0901")).isFalse();
        assertThat(Gid.isZero("0007:433a:5e60:0000:0000:0000:0000:0000")).isFalse();
        assertThat(Gid.isZero("0000:0000:0000:0000:0000:0000:0000:0001")).isFalse();
    }

    @Test
    void rejectsMalformedText() {
        assertThatThrownBy(() -> gid("fe80::1")).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void bytesAreCopiedSoTheRecordStaysImmutable() {
        Gid g = gid("fe80:0000:0000:0000:0000:0000:0000:0001");
        g.bytes()[0] = 0;
        assertThat(g.isLinkLocal()).isTrue();
        assertThat(g).isEqualTo(gid("fe80:0000:0000:0000:0000:0000:0000:0001"));
    }
}
