#!/usr/bin/env bash
# Creates the xenstore directories the backend's vchan:// listeners publish their rings in, with
# the permissions libxenvchan needs: owned by the backend's domain (which writes ring-ref and
# event-channel there), readable by the one guest each is for (which reads them), closed to others.
#
#   gpusockets-xenstore-setup [--self-domid N] [--base PATH] [--remove] GUEST...
#       GUEST is a domid or a domain name (dom0 resolves names with xl domid). For each, makes
#       BASE/GUESTID (BASE default /local/domain/SELF/data/gpusockets) and prints the backend's
#       --listen option for it.
#   gpusockets-xenstore-setup [--self-domid N] [--remove] --from-args BACKEND-ARGUMENTS...
#       The paths of the vchan:// listeners among the backend's arguments (--listen vchan://D/PATH):
#       what gpusockets-backend.service runs before the backend starts (and with --remove after it
#       stops). No vchan listener: nothing to do.
#
# Runs in dom0, or in a driver domain for its own /local/domain/<its domid>/data (a domain may
# write and chmod below its own data path). Needs xenstore-write, -chmod, -rm, -read (Debian:
# xen-utils-common). See xen-config/README.md.
set -euo pipefail
PATH=${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

usage() {
    sed -n '6,14s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

say() {
    echo "gpusockets-xenstore-setup: $*" >&2
}

self=""
base=""
remove=0
from_args=0
while (($# > 0)); do
    case $1 in
        --self-domid)
            (($# >= 2)) || { usage >&2; exit 2; }
            self=$2
            shift 2
            ;;
        --base)
            (($# >= 2)) || { usage >&2; exit 2; }
            base=$2
            shift 2
            ;;
        --remove)
            remove=1
            shift
            ;;
        --from-args)
            from_args=1
            shift
            break
            ;;
        -h | --help)
            usage
            exit 0
            ;;
        --)
            shift
            break
            ;;
        -*)
            say "unknown option: $1"
            usage >&2
            exit 2
            ;;
        *)
            break
            ;;
    esac
done

if [[ -z $self ]]; then
    self=$(xenstore-read domid 2>/dev/null || true)
    if [[ -z $self ]] && grep -qs control_d /proc/xen/capabilities; then
        self=0
    fi
fi
[[ $self =~ ^[0-9]+$ ]] || { say "cannot tell this domain's id (xenstore-read domid answered '$self'): give --self-domid N"; exit 2; }
base=${base:-/local/domain/$self/data/gpusockets}

# Pairs "GUESTID PATH", one a line.
channels=()
if ((from_args)); then
    while (($# > 0)); do
        uri=""
        case $1 in
            --listen)
                uri=${2:-}
                shift
                ;;
            --listen=*) uri=${1#--listen=} ;;
        esac
        shift
        [[ $uri == vchan://* ]] || continue
        if [[ ! $uri =~ ^vchan://([0-9]+)(/[A-Za-z0-9._/-]+)$ ]]; then
            say "not a vchan://DOMID/PATH listener: $uri"
            exit 2
        fi
        channels+=("${BASH_REMATCH[1]} ${BASH_REMATCH[2]}")
    done
    ((${#channels[@]} > 0)) || exit 0
else
    (($# > 0)) || { usage >&2; exit 2; }
    for guest in "$@"; do
        if [[ ! $guest =~ ^[0-9]+$ ]]; then
            name=$guest
            guest=$(xl domid "$name" 2>/dev/null || true)
            [[ $guest =~ ^[0-9]+$ ]] || { say "no running domain named $name (xl domid $name)"; exit 1; }
        fi
        channels+=("$guest $base/$guest")
    done
fi

for channel in "${channels[@]}"; do
    guest=${channel%% *}
    path=${channel#* }
    if ((remove)); then
        xenstore-rm "$path" 2>/dev/null || true
        say "removed $path"
        continue
    fi
    if [[ $guest == "$self" ]]; then
        say "guest $guest is this domain itself: a vchan joins two domains"
        exit 2
    fi
    # The parent directories: this domain's only (n = no access for others).
    parent=${path%/*}
    if [[ -z ${base_done:-} ]] && [[ $parent == "$base" || $parent == "$base"/* ]]; then
        xenstore-write "$base" ""
        xenstore-chmod "$base" "n$self"
        base_done=1
    fi
    xenstore-write "$path" ""
    # First entry: the owner (full access) and what others get; then the guest's read access.
    xenstore-chmod "$path" "n$self" "r$guest"
    say "$path: owned by domain $self, readable by domain $guest"
    if ((!from_args)); then
        printf -- '--listen vchan://%s%s\n' "$guest" "$path"
    fi
done
if ((remove && !from_args)); then
    # The base goes too once no guest's directory is left in it.
    if [[ -z $(xenstore-list "$base" 2>/dev/null || true) ]]; then
        xenstore-rm "$base" 2>/dev/null || true
    fi
fi
