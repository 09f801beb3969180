#!/bin/sh
# A Mus bot in POSIX sh, for the stdio bridge (docs/stdio.md):
#   mus match play random --stdio -- sh clients/stdio/examples/first_legal.sh
#
# It reads one JSON line at a time and answers each "request" line with one line. It never parses JSON: it cuts
# the ready-made answers out of the request's "legal" list (flat objects, so each one ends at its first "}") and
# sends one back verbatim. Its rule: cut the mus with two or more reyes (12 or 3) or after three discards, else
# ask for mus; throw away the lowest card (the last one-card discard: hands come sorted high to low); otherwise
# the first legal answer (paso, quiero, the true declaration, no sena).
# Every other line (hello, event, rejected, outcome) is skipped; its log goes to stderr.

last_single_discard() { # $1: the "legal" list without its brackets. Prints its last one-card discard.
    rest=$1 found=
    while [ -n "$rest" ]; do
        entry=${rest%%\}*}\}
        rest=${rest#"$entry"}
        rest=${rest#,}
        case $entry in
        *'","'*) ;;
        '{"kind":"discard"'*) found=$entry ;;
        esac
    done
    printf '%s' "$found"
}

while IFS= read -r line; do
    case $line in
    '{"type":"request"'*) ;;
    '{"type":"outcome"'*) echo "first_legal: outcome: $line" >&2; continue ;;
    '{"type":"rejected"'*) echo "first_legal: $line" >&2; continue ;;
    *) continue ;;
    esac
    legal=${line#*\"legal\":\[}
    legal=${legal%%\],\"kinds\":*}
    first=${legal%%\}*}\}
    answer=$first
    case $line in
    *'"decision":"mus"'*)
        cards=${line#*\"cards\":\[}
        cards=${cards%%\]*}
        reyes=0
        for card in $(printf '%s' "$cards" | tr ',"' '  '); do
            case $card in 12? | 3?) reyes=$((reyes + 1)) ;; esac
        done
        rounds=${line#*\"discard_rounds\":}
        rounds=${rounds%%,*}
        if [ "$reyes" -ge 2 ] || [ "$rounds" -ge 3 ]; then
            answer='{"kind":"no_mus"}'
        else
            answer='{"kind":"mus"}'
        fi
        ;;
    *'"decision":"discard"'*)
        lowest=$(last_single_discard "$legal")
        answer=${lowest:-$first}
        ;;
    esac
    printf '%s\n' "$answer"
done
