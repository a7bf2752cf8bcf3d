/* start.S: multiboot entry of the e2e guest: a stack, then guestMain. */
    .section .text
    .globl _start
_start:
    cli
    movl $stack_top, %esp
    pushl %ebx          /* multiboot information */
    pushl %eax          /* multiboot magic */
    call guestMain
1:  hlt
    jmp 1b

    .section .bss
    .align 16
    .space 65536
stack_top:
    .section .note.GNU-stack, "", @progbits
