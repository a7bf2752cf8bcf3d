/*
 * vrmguest.c: the end-to-end tests' guest, a bare multiboot kernel
 *
 * It fills its RAM with a pattern that every page can be checked against on
 * its own, then keeps rewriting a small "dirty" region, so that a live
 * migration has both bulk memory and pages that change under it. Every few
 * sweeps it verifies all of RAM and reports on the first serial port:
 *
 *   vrm-guest: filled <pages> pages (<static> static, <dirty> dirty)
 *   vrm-guest: verify <n> ok gen <g>
 *   vrm-guest: verify <n> FAIL page <p> word <w> value <v> expected <e>
 *
 * Page layout (32-bit words): static page p: {p, MAGIC, H(p) x 1022};
 * dirty page p at generation g: {p, g, H(p)^g x 1022}. A page that was
 * lost, moved or altered in transit fails the check.
 *
 * With disk_sectors=N it also writes sectors [1, 1+N) of the primary IDE
 * master (sector 0 is left alone): all of them at start, then a batch of
 * 16 each sweep, round-robin, each batch flushed, so that a migration
 * copying the disk (--copy-storage-all) has writes under it; each pass
 * reads them all back after the memory verify. Sector s at generation g
 * is {s, g, H(s)^g x 126}; the generation each sector was last written
 * with is kept in guest RAM, so the destination checks the disk it got
 * against the guest it got.
 *
 *   vrm-guest: disk <N> sectors written
 *   vrm-guest: disk verify <n> sectors <N> ok writes <sector writes so far>
 *   vrm-guest: disk verify <n> FAIL sector <s> word <w> value <v> expected <e>
 *   vrm-guest: disk FAIL <command> sector <s> status <st> error <err>
 *
 * (no "verify <n> ok" in a disk line: the tests count those lines as
 * memory verifies). A failure halts the guest.
 *
 * Kernel command line (libvirt <cmdline>): dirty_kb=N (default 2048),
 * verify_every=N sweeps (default 4), pause=N busy-loop iterations between
 * dirty pages (default 0) to bound the dirty rate, corrupt_page=N flips a
 * bit of static page N after the first verify (the verifier's own test),
 * idle=1 halts the CPU once RAM is filled (no dirtying, no verifying, no
 * disk: the benchmark's idle guest, checked from outside by hashing guest
 * memory), disk_sectors=N (default 0: no disk; at most 4096),
 * corrupt_sector=S writes the second half of sector S at another
 * generation after the first disk verify, behind the table's back (the
 * disk verifier's test).
 */

typedef unsigned int u32;
typedef unsigned char u8;

#define VRM_GUEST_MAGIC 0x564d5247u     /* "VMRG" */
#define PAGE_SIZE 4096u
#define PAGE_WORDS (PAGE_SIZE / 4)
#define FIRST_PAGE_ADDR (4u << 20)      /* above the kernel and its stack */

/* Multiboot v1 header: page-aligned modules, memory information. */
#define MB_MAGIC 0x1BADB002u
#define MB_FLAGS 0x00000003u
__attribute__((section(".multiboot"), used, aligned(4)))
static const u32 multibootHeader[3] = {
    MB_MAGIC, MB_FLAGS, (u32)-(MB_MAGIC + MB_FLAGS),
};

struct mbInfo {
    u32 flags;
    u32 memLower;
    u32 memUpper;   /* KiB above 1 MiB */
    u32 bootDevice;
    u32 cmdline;
};

void guestMain(u32 magic, struct mbInfo *mbi);

static inline void
outb(unsigned short port, u8 v)
{
    __asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}

static inline u8
inb(unsigned short port)
{
    u8 v;
    __asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
    return v;
}

static void
serialPutc(char c)
{
    while (!(inb(0x3f8 + 5) & 0x20))
        ;
    outb(0x3f8, c);
}

static void
serialPuts(const char *s)
{
    while (*s) {
        if (*s == '\n')
            serialPutc('\r');
        serialPutc(*s++);
    }
}

static void
serialPutu(u32 v)
{
    char buf[12];
    int i = 11;

    buf[i] = 0;
    do {
        buf[--i] = '0' + v % 10;
        v /= 10;
    } while (v);
    serialPuts(buf + i);
}

static void
serialPutx(u32 v)
{
    static const char hex[] = "0123456789abcdef";
    char buf[11];
    int i;

    buf[0] = '0';
    buf[1] = 'x';
    for (i = 0; i < 8; i++)
        buf[2 + i] = hex[(v >> (28 - 4 * i)) & 0xf];
    buf[10] = 0;
    serialPuts(buf);
}

/* A non-zero hash of the page number: zero pages would not be migrated. */
static u32
pageHash(u32 p)
{
    u32 x = p * 0x9e3779b1u + 0x7f4a7c15u;

    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    x ^= x >> 12;
    return x | 0x01000000u;
}

static void
fillWords(u32 *dst, u32 value, u32 count)
{
    __asm__ volatile("cld; rep stosl"
                     : "+D"(dst), "+c"(count)
                     : "a"(value)
                     : "memory");
}

/* Index of the first word of [p, p+count) not equal to value, or count. */
static u32
scanWords(const u32 *p, u32 value, u32 count)
{
    u32 left = count;
    const u32 *q = p;

    if (!count)
        return 0;
    __asm__ volatile("cld; repe scasl"
                     : "+D"(q), "+c"(left)
                     : "a"(value)
                     : "memory", "cc");
    if (q[-1] != value)
        return (u32)(q - p) - 1;
    return count;
}

static u32
parseNumber(const char *cmdline, const char *key, u32 dflt)
{
    const char *s = cmdline;
    u32 v;

    if (!s)
        return dflt;
    while (*s) {
        const char *k = key;
        const char *t = s;

        while (*k && *t == *k) {
            k++;
            t++;
        }
        if (!*k && *t == '=' && (s == cmdline || s[-1] == ' ')) {
            t++;
            v = 0;
            while (*t >= '0' && *t <= '9')
                v = v * 10 + (*t++ - '0');
            return v;
        }
        s++;
    }
    return dflt;
}

static void
reportFail(u32 pass, u32 page, u32 word, u32 value, u32 expected)
{
    serialPuts("vrm-guest: verify ");
    serialPutu(pass);
    serialPuts(" FAIL page ");
    serialPutx(page);
    serialPuts(" word ");
    serialPutu(word);
    serialPuts(" value ");
    serialPutx(value);
    serialPuts(" expected ");
    serialPutx(expected);
    serialPuts("\n");
}

/* The runs of words [2, count) of w and what each run holds (xored with
 * hash: the generation it was written at, for a dirty page or a sector),
 * so that a log tells a torn page (two generations, split at one word)
 * from a lost or moved one; at most 8 runs */
static void
describeRuns(const u32 *w, u32 count, u32 hash, const char *what)
{
    u32 i = 2, runs = 0;

    while (i < count && runs < 8) {
        u32 v = w[i] ^ hash, j = i;

        while (j < count && (w[j] ^ hash) == v)
            j++;
        serialPuts(runs ? ", " : ": ");
        serialPutu(i);
        serialPuts("..");
        serialPutu(j - 1);
        serialPuts(what);
        serialPutx(v);
        i = j;
        runs++;
    }
    serialPuts(i < count ? ", ...\n" : "\n");
}

/* After a failure: page p's first words and its runs */
static void
describePage(u32 p, u32 dirty, u32 gen)
{
    const u32 *w = (const u32 *)(p * PAGE_SIZE);

    serialPuts("vrm-guest: page ");
    serialPutx(p);
    serialPuts(" word0 ");
    serialPutx(w[0]);
    serialPuts(" word1 ");
    serialPutx(w[1]);
    serialPuts(" guest gen ");
    serialPutu(gen);
    describeRuns(w, PAGE_WORDS, pageHash(p), dirty ? " gen " : " xor ");
}

/* Make the emulator log a write it might miss: drop its translation of
 * the page of @addr, then write the word again (the first write through a
 * new translation is logged). QEMU before 9.0 under TCG does not reset a
 * translation when migration clears the page's dirty bit, so writes
 * through one cached before are not logged and the migrated copy keeps a
 * stale page (QEMU commit 03bfc2188f). A hardware CPU logs every write. */
static inline void
logWrite(volatile u32 *addr)
{
    __asm__ volatile("invlpg (%0)" : : "r"(addr) : "memory");
    *addr = *addr;
}

/* The disk: the primary ATA channel's master (QEMU pc's IDE), legacy PIO,
 * LBA28, polled: interrupts stay off (cli) and nIEN is set. */
#define ATA_DATA 0x1f0
#define ATA_ERROR 0x1f1
#define ATA_COUNT 0x1f2
#define ATA_LBA0 0x1f3
#define ATA_LBA1 0x1f4
#define ATA_LBA2 0x1f5
#define ATA_DRIVE 0x1f6
#define ATA_STATUS 0x1f7        /* the command register when written */
#define ATA_CONTROL 0x3f6       /* the alternate status when read */
#define ATA_NIEN 0x02
#define ATA_BSY 0x80
#define ATA_DRDY 0x40
#define ATA_DF 0x20
#define ATA_DRQ 0x08
#define ATA_ERR 0x01
#define ATA_READ_SECTORS 0x20
#define ATA_WRITE_SECTORS 0x30
#define ATA_FLUSH_CACHE 0xe7
#define ATA_IDENTIFY 0xec
/* Status polls before giving up on the drive: counted, not timed, so
 * that a vCPU stopped for a migration's switchover uses none; an inb
 * takes about 0.5 us under TCG (so 100 s), more under KVM (an exit to
 * QEMU). */
#define ATA_POLLS 200000000u

#define SECTOR_WORDS (512u / 4)
#define DISK_MAX_SECTORS 4096u
#define DISK_BATCH 16u          /* sectors rewritten each sweep */

/* The generation sector s was last written with, at diskGen[s]: in RAM,
 * so the destination checks the disk it got against the guest it got.
 * Entries [1, 1+N) are set by the first writes (the .bss is not cleared
 * by start.S). */
static u32 diskGen[1 + DISK_MAX_SECTORS];
static u32 diskBuf[SECTOR_WORDS];
static volatile u32 diskWrites; /* sector writes so far */

static inline void
outsw(unsigned short port, const u32 *buf, u32 words)
{
    __asm__ volatile("cld; rep outsw"
                     : "+S"(buf), "+c"(words)
                     : "d"(port)
                     : "memory");
}

static inline void
insw(unsigned short port, u32 *buf, u32 words)
{
    __asm__ volatile("cld; rep insw"
                     : "+D"(buf), "+c"(words)
                     : "d"(port)
                     : "memory");
}

static void
halt(void)
{
    for (;;)
        __asm__ volatile("hlt");
}

static void
diskFail(const char *what, u32 sector, u8 status)
{
    serialPuts("vrm-guest: disk FAIL ");
    serialPuts(what);
    serialPuts(" sector ");
    serialPutu(sector);
    serialPuts(" status ");
    serialPutx(status);
    serialPuts(" error ");
    serialPutx(inb(ATA_ERROR));
    serialPuts("\n");
    halt();
}

/* Wait for the drive to be done with the last step (BSY clear), then
 * for DRQ if @drq (it wants or has a sector) or for its absence (the
 * command is over); ERR or DF is a failure. */
static void
ataWait(u32 drq, const char *what, u32 sector)
{
    u32 i;
    u8 st = 0;

    for (i = 0; i < ATA_POLLS; i++) {
        st = inb(ATA_STATUS);
        if (st & ATA_BSY)
            continue;
        if (st & (ATA_ERR | ATA_DF))
            break;
        if (!drq && (st & ATA_DRQ))
            break;
        if (!drq || (st & ATA_DRQ))
            return;
    }
    diskFail(what, sector, st);
}

/* Start @cmd on @count sectors (1..256) from @lba once the drive is ready */
static void
ataCommand(u8 cmd, u32 lba, u32 count, const char *what)
{
    u32 i;
    u8 st = 0;

    outb(ATA_DRIVE, 0xe0 | ((lba >> 24) & 0x0f));    /* master, LBA */
    for (i = 0; i < ATA_POLLS; i++) {
        st = inb(ATA_STATUS);
        if ((st & (ATA_BSY | ATA_DRDY | ATA_DRQ)) == ATA_DRDY)
            break;
    }
    if (i == ATA_POLLS || (st & (ATA_ERR | ATA_DF)))
        diskFail(what, lba, st);
    outb(ATA_COUNT, count & 0xff);      /* 0 is 256 */
    outb(ATA_LBA0, lba & 0xff);
    outb(ATA_LBA1, (lba >> 8) & 0xff);
    outb(ATA_LBA2, (lba >> 16) & 0xff);
    outb(ATA_STATUS, cmd);
}

static void
sectorFill(u32 *w, u32 s, u32 gen)
{
    w[0] = s;
    w[1] = gen;
    fillWords(w + 2, pageHash(s) ^ gen, SECTOR_WORDS - 2);
}

/* Write sectors [first, first+count) (count <= 256) at generation gen,
 * their second halves at tailGen (gen but for corrupt_sector), and flush
 * the drive's cache: the write is done once this returns. */
static void
diskWrite(u32 first, u32 count, u32 gen, u32 tailGen)
{
    u32 s;

    ataCommand(ATA_WRITE_SECTORS, first, count, "write");
    ataWait(1, "write", first);
    for (s = first; s < first + count; s++) {
        sectorFill(diskBuf, s, gen);
        if (tailGen != gen)
            fillWords(diskBuf + SECTOR_WORDS / 2, pageHash(s) ^ tailGen,
                      SECTOR_WORDS / 2);
        outsw(ATA_DATA, diskBuf, SECTOR_WORDS * 2);
        /* an error now is the write of sector s failing */
        ataWait(s + 1 < first + count, "write", s);
    }
    ataCommand(ATA_FLUSH_CACHE, 0, 0, "flush");
    ataWait(0, "flush", first + count - 1);
    diskWrites += count;
    logWrite(&diskWrites);
}

/* Rewrite [first, first+count) at gen, and only then record it (logged,
 * as the dirty pages are: a table entry the destination misses would be
 * a false failure there) */
static void
diskRewrite(u32 first, u32 count, u32 gen)
{
    u32 s;

    diskWrite(first, count, gen, gen);
    for (s = first; s < first + count; s++) {
        diskGen[s] = gen;
        logWrite(&diskGen[s]);
    }
}

/* Check the drive is there and holds sectors [0, 1+sectors): a
 * misconfigured test fails here, not as a write error later */
static void
diskIdentify(u32 sectors)
{
    u32 size;
    u8 st;

    outb(ATA_CONTROL, ATA_NIEN);
    outb(ATA_DRIVE, 0xe0);
    st = inb(ATA_STATUS);
    if (st == 0 || st == 0xff)
        diskFail("no drive,", 0, st);
    ataCommand(ATA_IDENTIFY, 0, 0, "identify");
    ataWait(1, "identify", 0);
    insw(ATA_DATA, diskBuf, SECTOR_WORDS * 2);
    ataWait(0, "identify", 0);
    size = diskBuf[30];         /* words 60-61: LBA28 sectors */
    if (size < 1 + sectors) {
        serialPuts("vrm-guest: disk FAIL ");
        serialPutu(size);
        serialPuts(" sectors, too small for ");
        serialPutu(sectors);
        serialPuts(" after sector 0\n");
        halt();
    }
}

/* Read back sectors [1, 1+sectors) and check each against the table */
static u32
diskVerify(u32 pass, u32 sectors)
{
    u32 first, s, w, i, count, want;

    for (first = 1; first < 1 + sectors; first += count) {
        count = 1 + sectors - first;
        if (count > 256)
            count = 256;
        ataCommand(ATA_READ_SECTORS, first, count, "read");
        for (s = first; s < first + count; s++) {
            ataWait(1, "read", s);
            insw(ATA_DATA, diskBuf, SECTOR_WORDS * 2);
            want = pageHash(s) ^ diskGen[s];
            w = 0;
            if (diskBuf[0] != s) {
                want = s;
            } else if (diskBuf[1] != diskGen[s]) {
                w = 1;
                want = diskGen[s];
            } else if ((i = scanWords(diskBuf + 2, want, SECTOR_WORDS - 2)) !=
                       SECTOR_WORDS - 2) {
                w = i + 2;
            } else {
                continue;
            }
            serialPuts("vrm-guest: disk verify ");
            serialPutu(pass);
            serialPuts(" FAIL sector ");
            serialPutu(s);
            serialPuts(" word ");
            serialPutu(w);
            serialPuts(" value ");
            serialPutx(diskBuf[w]);
            serialPuts(" expected ");
            serialPutx(want);
            serialPuts("\nvrm-guest: sector ");
            serialPutu(s);
            serialPuts(" word0 ");
            serialPutx(diskBuf[0]);
            serialPuts(" word1 ");
            serialPutx(diskBuf[1]);
            serialPuts(" table gen ");
            serialPutu(diskGen[s]);
            describeRuns(diskBuf, SECTOR_WORDS, pageHash(s), " gen ");
            return 1;
        }
        ataWait(0, "read", first + count - 1);
    }
    return 0;
}

void
guestMain(u32 magic, struct mbInfo *mbi)
{
    u32 memEnd, firstPage, lastPage, dirtyPages, dirtyFirst, p, gen, pass;
    u32 verifyEvery, pause, corruptPage, idle, i;
    u32 diskSectors, corruptSector, diskNext = 1;
    const char *cmdline = 0;
    volatile u32 spin;

    serialPuts("vrm-guest: started\n");
    if (magic != 0x2BADB002u || !(mbi->flags & 1)) {
        serialPuts("vrm-guest: no multiboot memory information\n");
        for (;;)
            __asm__ volatile("hlt");
    }
    if (mbi->flags & 4)
        cmdline = (const char *)mbi->cmdline;

    memEnd = (1u << 20) + mbi->memUpper * 1024u;
    firstPage = FIRST_PAGE_ADDR / PAGE_SIZE;
    lastPage = memEnd / PAGE_SIZE;      /* exclusive */
    dirtyPages = parseNumber(cmdline, "dirty_kb", 2048) / 4;
    verifyEvery = parseNumber(cmdline, "verify_every", 4);
    pause = parseNumber(cmdline, "pause", 0);
    corruptPage = parseNumber(cmdline, "corrupt_page", 0);
    idle = parseNumber(cmdline, "idle", 0);
    diskSectors = parseNumber(cmdline, "disk_sectors", 0);
    corruptSector = parseNumber(cmdline, "corrupt_sector", 0);
    if (diskSectors > DISK_MAX_SECTORS)
        diskSectors = DISK_MAX_SECTORS;
    if (idle)
        dirtyPages = 0;
    if (dirtyPages > (lastPage - firstPage) / 2)
        dirtyPages = (lastPage - firstPage) / 2;
    dirtyFirst = lastPage - dirtyPages;

    for (p = firstPage; p < dirtyFirst; p++) {
        u32 *w = (u32 *)(p * PAGE_SIZE);
        w[0] = p;
        w[1] = VRM_GUEST_MAGIC;
        fillWords(w + 2, pageHash(p), PAGE_WORDS - 2);
    }
    gen = 1;
    for (p = dirtyFirst; p < lastPage; p++) {
        u32 *w = (u32 *)(p * PAGE_SIZE);
        w[0] = p;
        w[1] = gen;
        fillWords(w + 2, pageHash(p) ^ gen, PAGE_WORDS - 2);
    }
    serialPuts("vrm-guest: filled ");
    serialPutu(lastPage - firstPage);
    serialPuts(" pages (");
    serialPutu(dirtyFirst - firstPage);
    serialPuts(" static, ");
    serialPutu(dirtyPages);
    serialPuts(" dirty)\n");
    if (idle) {
        /* Interrupts stay off: the vCPU sleeps for good and RAM is frozen. */
        serialPuts("vrm-guest: idle\n");
        for (;;)
            __asm__ volatile("cli; hlt");
    }
    if (diskSectors) {
        diskIdentify(diskSectors);
        diskWrites = 0;
        /* generation 1, as the dirty pages: 256 sectors a command */
        for (p = 1; p < 1 + diskSectors; p += i) {
            i = 1 + diskSectors - p < 256 ? 1 + diskSectors - p : 256;
            diskRewrite(p, i, gen);
        }
        serialPuts("vrm-guest: disk ");
        serialPutu(diskSectors);
        serialPuts(" sectors written\n");
    }

    for (pass = 1;; pass++) {
        u32 sweep, bad = 0;

        for (sweep = 0; sweep < verifyEvery; sweep++) {
            gen++;
            /* gen lives on the stack: a page rewritten with it must never
             * reach the other host without it (logWrite) */
            logWrite((volatile u32 *)&gen);
            for (p = dirtyFirst; p < lastPage; p++) {
                u32 *w = (u32 *)(p * PAGE_SIZE);
                /* logged before and after the fill: a dirty bit cleared
                 * while the page is being filled is set again once it is
                 * whole (w[0] never changes) */
                w[1] = gen;
                logWrite(&w[1]);
                fillWords(w + 2, pageHash(p) ^ gen, PAGE_WORDS - 2);
                logWrite(&w[PAGE_WORDS - 1]);
                w[0] = p;
                for (spin = 0; spin < pause; spin++)
                    ;
            }
            if (diskSectors) {
                u32 count = 1 + diskSectors - diskNext;

                if (count > DISK_BATCH)
                    count = DISK_BATCH;
                diskRewrite(diskNext, count, gen);
                diskNext += count;
                if (diskNext == 1 + diskSectors)
                    diskNext = 1;
            }
        }

        for (p = firstPage; p < lastPage && !bad; p++) {
            u32 *w = (u32 *)(p * PAGE_SIZE);
            u32 want = p < dirtyFirst ? pageHash(p) : pageHash(p) ^ w[1];

            if (w[0] != p) {
                reportFail(pass, p, 0, w[0], p);
                bad = 1;
            } else if (p < dirtyFirst && w[1] != VRM_GUEST_MAGIC) {
                reportFail(pass, p, 1, w[1], VRM_GUEST_MAGIC);
                bad = 1;
            } else if (p >= dirtyFirst && (w[1] == 0 || w[1] > gen)) {
                reportFail(pass, p, 1, w[1], gen);
                bad = 1;
            } else if ((i = scanWords(w + 2, want, PAGE_WORDS - 2)) != PAGE_WORDS - 2) {
                reportFail(pass, p, i + 2, w[i + 2], want);
                bad = 1;
            }
            if (bad) {
                describePage(p, p >= dirtyFirst, gen);
                if (p + 1 < lastPage)
                    describePage(p + 1, p + 1 >= dirtyFirst, gen);
            }
        }
        if (pass == 1 && corruptPage >= firstPage && corruptPage < dirtyFirst)
            ((u32 *)(corruptPage * PAGE_SIZE))[PAGE_WORDS / 2] ^= 0x10;

        /* Every pass: the tests wait for the second pass printed after a
         * migration (the first may have begun on the other host); a pass
         * takes about a second under TCG, so the log stays small. */
        if (!bad) {
            serialPuts("vrm-guest: verify ");
            serialPutu(pass);
            serialPuts(" ok gen ");
            serialPutu(gen);
            serialPuts("\n");
        } else if (bad) {
            for (;;)
                __asm__ volatile("hlt");
        }

        if (diskSectors) {
            /* corrupt_sector: after the first disk verify, but right
             * before the second (the sweeps may rewrite the sector): a
             * torn sector, its second half at a generation not yet used */
            if (pass == 2 && corruptSector >= 1 &&
                corruptSector < 1 + diskSectors)
                diskWrite(corruptSector, 1, diskGen[corruptSector], gen + 1);
            if (diskVerify(pass, diskSectors))
                halt();
            serialPuts("vrm-guest: disk verify ");
            serialPutu(pass);
            serialPuts(" sectors ");
            serialPutu(diskSectors);
            serialPuts(" ok writes ");
            serialPutu(diskWrites);
            serialPuts("\n");
        }
    }
}
