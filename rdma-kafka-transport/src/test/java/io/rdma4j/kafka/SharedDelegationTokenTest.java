package io.rdma4j.kafka;

import org.junit.jupiter.api.Test;

import java.util.HashMap;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/** Which consumers share a delegation token: those with the same cluster and security settings (one principal). */
class SharedDelegationTokenTest {

    private static Map<String, Object> consumer(String user) {
        Map<String, Object> c = new HashMap<>();
        c.put("bootstrap.servers", "b1:9092,b2:9092");
        c.put("security.protocol", "SASL_SSL");
        c.put("sasl.mechanism", "SCRAM-SHA-512");
        c.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"" + user + "\" password=\"p\";");
        c.put("ssl.truststore.location", "/etc/kafka/truststore.jks");
        c.put("group.id", "g");
        c.put("client.id", "c");
        c.put("request.timeout.ms", "30000");
        return c;
    }

    private static Map<String, Object> principal(Map<String, Object> consumer) {
        return SharedDelegationToken.principalSettings(SharedDelegationToken.adminConfigs(consumer));
    }

    @Test
    void consumersThatDifferOnlyInGroupClientIdOrTimeoutsShareOneToken() {
        Map<String, Object> other = consumer("alice");
        other.put("group.id", "another-group");
        other.put("client.id", "another-client");
        other.put("request.timeout.ms", "5000");
        other.put("max.poll.records", "10");
        assertThat(principal(other)).isEqualTo(principal(consumer("alice")));
        assertThat(principal(other)).containsKeys("bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.jaas.config",
                "ssl.truststore.location").doesNotContainKeys("group.id", "client.id", "request.timeout.ms");
    }

    @Test
    void anotherUserOrClusterOrTrustGetsATokenOfItsOwn() {
        Map<String, Object> alice = principal(consumer("alice"));
        assertThat(principal(consumer("bob"))).as("another SASL user").isNotEqualTo(alice);
        Map<String, Object> otherCluster = consumer("alice");
        otherCluster.put("bootstrap.servers", "c1:9092");
        assertThat(principal(otherCluster)).as("another cluster").isNotEqualTo(alice);
        Map<String, Object> otherKeystore = consumer("alice");
        otherKeystore.put("ssl.keystore.location", "/etc/kafka/bob.jks");
        assertThat(principal(otherKeystore)).as("a TLS client certificate").isNotEqualTo(alice);
    }

    @Test
    void theAdminClientOfTheTokenHasAClientIdOfItsOwnAndNoConsumerOnlySetting() {
        Map<String, Object> admin = SharedDelegationToken.adminConfigs(consumer("alice"));
        assertThat(admin).containsEntry("client.id", "c-rdma4j-token").doesNotContainKey("group.id").containsKey("sasl.jaas.config");
    }
}
