/*
 * vrmdomainxml.h: read and edit our element inside a full libvirt domain XML
 *
 * libxml2 does not re-serialise a document byte for byte (attribute
 * quotes, empty elements, whitespace in tags, character references all
 * change), so edits are made on the text: the parsed tree tells which
 * element to edit, a scanner of the raw text finds that element's byte
 * range, and the new text is spliced in. Every byte outside the edited
 * element comes out as it went in: other metadata namespaces, comments,
 * CDATA, ordering, quoting, line endings.
 *
 * Public API summary
 * ------------------
 *   vrmDomainXMLGetMigration(xml, &def)  our <rdma:migration> anywhere in
 *                                        <metadata>: 1 found, 0 absent, -1 error
 *   vrmDomainXMLSetMigration(xml, def)   replace (or add) the whole element
 *   vrmDomainXMLSetLocator(xml, loc)     remove <offer> and <answer> left by old
 *                                        versions, then add or replace
 *                                        <locator> in our element (created,
 *                                        with <metadata>, if needed): what the
 *                                        destination's hook prints
 *   vrmDomainXMLStripNegotiation(xml)    remove <offer> and <answer>; an element
 *                                        (or <metadata>) left empty goes too
 *   vrmDomainXMLCountCopyDisks(xml, &n)  the disks --copy-storage-all could copy
 *                                        (one NBD connection each): 0 or -1
 *
 * The editors return a new string (g_free) or NULL with an error reported. Input
 * must be UTF-8 (libvirt always writes UTF-8); a DOCTYPE that declares
 * entities is refused.
 */
#pragma once

#include "vrmmigrationdef.h"

int vrmDomainXMLGetMigration(const char *xml, vrmMigrationDef **def);
char *vrmDomainXMLSetMigration(const char *xml, const vrmMigrationDef *def);
char *vrmDomainXMLSetLocator(const char *xml, const vrmLocator *locator);
char *vrmDomainXMLStripNegotiation(const char *xml);
int vrmDomainXMLCountCopyDisks(const char *xml, unsigned int *disks);
