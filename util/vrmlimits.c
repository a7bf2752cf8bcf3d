/*
 * vrmlimits.c: the pinned-memory formula, the one place it is written
 */
#include <config.h>

#include "vrmlimits.h"

unsigned long long
vrmPinnedBytes(unsigned int channels, unsigned int ringDepth,
               unsigned int chunkSize)
{
    /* per channel: a receive ring and a staging ring, every chunk of both
     * registered, and the registered control buffers of both queues */
    unsigned long long rings = 2ull * ringDepth * chunkSize;
    unsigned long long control = (unsigned long long)(VRM_SEND_SLOTS(ringDepth) +
                                  VRM_RECV_SLOTS(ringDepth)) *
                       VRM_CONTROL_MESSAGE_MAX;

    return (unsigned long long)channels * (rings + control);
}

unsigned long long
vrmMemlockBytes(unsigned int channels, unsigned int ringDepth,
                unsigned int chunkSize, unsigned long pageSize)
{
    /* the kernel pins (and counts) whole pages: every registered region
     * may reach into one page more than its length fills */
    return vrmPinnedBytes(channels, ringDepth, chunkSize) +
        (unsigned long long)channels * VRM_REGIONS_PER_CHANNEL(ringDepth) * pageSize;
}

unsigned int
vrmRingDepthDefault(unsigned int chunkSize)
{
    unsigned int depth = chunkSize ? VRM_RING_BYTES_DEFAULT / chunkSize : 0;

    if (depth < VRM_RING_DEPTH_DEFAULT)
        return VRM_RING_DEPTH_DEFAULT;
    return depth < VRM_RING_DEPTH_MAX ? depth : VRM_RING_DEPTH_MAX;
}
