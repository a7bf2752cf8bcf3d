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
 * Kernel command line (libvirt <cmdline>): dirty_kb=N (default 2048),
 * verify_every=N sweeps (default 4), pause=N busy-loop iterations between
 * dirty pages (default 0) to bound the dirty rate, corrupt_page=N flips a
 * bit of static page N after the first verify (the verifier's own test),
 * idle=1 halts the CPU once RAM is filled (no dirtying, no verifying: the
 * benchmark's idle guest, checked from outside by hashing guest memory).
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

/* After a failure: the runs of words of page p and what each run holds
 * (the generation it was written at, for a dirty page), so that a log
 * tells a torn page (two generations, split at one word) from a lost or
 * moved one; at most 8 runs */
static void
describePage(u32 p, u32 dirty, u32 gen)
{
    const u32 *w = (const u32 *)(p * PAGE_SIZE);
    u32 i = 2, runs = 0;

    serialPuts("vrm-guest: page ");
    serialPutx(p);
    serialPuts(" word0 ");
    serialPutx(w[0]);
    serialPuts(" word1 ");
    serialPutx(w[1]);
    serialPuts(" guest gen ");
    serialPutu(gen);
    while (i < PAGE_WORDS && runs < 8) {
        u32 v = w[i] ^ pageHash(p), j = i;

        while (j < PAGE_WORDS && (w[j] ^ pageHash(p)) == v)
            j++;
        serialPuts(runs ? ", " : ": ");
        serialPutu(i);
        serialPuts("..");
        serialPutu(j - 1);
        serialPuts(dirty ? " gen " : " xor ");
        serialPutx(v);
        i = j;
        runs++;
    }
    serialPuts(i < PAGE_WORDS ? ", ...\n" : "\n");
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

void
guestMain(u32 magic, struct mbInfo *mbi)
{
    u32 memEnd, firstPage, lastPage, dirtyPages, dirtyFirst, p, gen, pass;
    u32 verifyEvery, pause, corruptPage, idle, i;
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
    }
}
