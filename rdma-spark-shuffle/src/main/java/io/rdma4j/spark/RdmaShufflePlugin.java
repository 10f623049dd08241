package io.rdma4j.spark;

import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;

import java.util.Map;

/**
 * The RDMA shuffle's metrics in Spark's metrics system: {@code spark.plugins=io.rdma4j.spark.RdmaShufflePlugin}.
 * Each executor registers them (see {@link RdmaShuffleMetrics#registerIn}) under the source
 * {@code plugin.io.rdma4j.spark.RdmaShufflePlugin}, so every sink configured for executors (JMX, CSV, Graphite,
 * ...) reports them.
 */
public final class RdmaShufflePlugin implements SparkPlugin {

    @Override
    public DriverPlugin driverPlugin() {
        return null; // the driver reads no shuffle blocks
    }

    @Override
    public ExecutorPlugin executorPlugin() {
        return new ExecutorPlugin() {
            @Override
            public void init(PluginContext ctx, Map<String, String> extraConf) {
                RdmaShuffleMetrics.registerIn(ctx.metricRegistry());
            }
        };
    }
}
