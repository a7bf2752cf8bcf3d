#!/bin/bash
# copy-tree.sh TOP DEST: copy the project's files from TOP into DEST, as a
# package build sees them: in a git checkout what git tracks or would track
# (no build directories, nothing ignored), else the tree without build*
# and .git. tools/build-debs.sh and tools/build-debs-clean.sh build in
# such a copy.
set -euo pipefail
top=${1:?usage: copy-tree.sh TOP DEST}
dest=${2:?usage: copy-tree.sh TOP DEST}
mkdir -p "$dest"
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$top" ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do
            [ -e "$top/$f" ] && printf '%s\0' "$f"
        done |
        tar -C "$top" --null -T - -cf - | tar -C "$dest" -xf -
else
    tar -C "$top" --exclude='./build*' --exclude='./.git' -cf - . | tar -C "$dest" -xf -
fi
