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
