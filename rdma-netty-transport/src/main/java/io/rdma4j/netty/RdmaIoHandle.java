package io.rdma4j.netty;

import io.netty.channel.IoEvent;
import io.netty.channel.IoHandle;

/** What a channel of this transport registers with {@link RdmaIoHandler}. */
@SuppressWarnings("try") // Netty's IoHandle.close() declares Exception; nothing here uses it in try-with-resources
interface RdmaIoHandle extends IoHandle {

    /**
     * An event posted through a registration that was cancelled before the loop handed it over (the channel moved
     * to another loop, or closed): the channel posts it through its current registration or disposes of it.
     */
    void orphaned(IoEvent event);
}
