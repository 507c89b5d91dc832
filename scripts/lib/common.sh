# shellcheck shell=bash
# Shared by the GPUsockets scripts: source it, do not run it.

# Prints the major version of the java binary $1 (8 for "1.8.0_x", 25 for "25.0.1"), or nothing.
java_major() {
    local java=$1 line version
    [[ -x $java ]] || return 0
    line=$("$java" -version 2>&1 | head -n 1) || return 0
    version=${line#*\"}
    version=${version%%\"*}
    if [[ $version == 1.* ]]; then
        version=${version#1.}
    fi
    version=${version%%[.+-]*}
    [[ $version =~ ^[0-9]+$ ]] && printf '%s\n' "$version"
    return 0
}

# Finds a JDK (or runtime) 25 or newer and sets JAVA_HOME and JAVA; exits 2 saying what to install.
# Order: $JAVA_HOME if it is >= 25; the newest /usr/lib/jvm/*25*; the bundle's runtime/ (under
# $GPUSOCKETS_HOME, when the caller runs from a bundle).
find_java25() {
    local candidate major best=""
    if [[ -n ${JAVA_HOME:-} ]]; then
        major=$(java_major "$JAVA_HOME/bin/java")
        if [[ -n $major ]] && ((major >= 25)); then
            best=$JAVA_HOME
        fi
    fi
    if [[ -z $best ]]; then
        while IFS= read -r candidate; do
            major=$(java_major "$candidate/bin/java")
            if [[ -n $major ]] && ((major >= 25)); then
                best=$candidate
            fi
        done < <(compgen -G '/usr/lib/jvm/*25*' | sort -V)
    fi
    if [[ -z $best && -n ${GPUSOCKETS_HOME:-} && -x $GPUSOCKETS_HOME/runtime/bin/java ]]; then
        best=$GPUSOCKETS_HOME/runtime
    fi
    if [[ -z $best ]]; then
        echo "GPUsockets needs JDK 25: install Temurin 25 (apt: temurin-25-jdk) or set JAVA_HOME to a JDK 25" >&2
        exit 2
    fi
    export JAVA_HOME=$best
    # shellcheck disable=SC2034 # JAVA is for the scripts that source this file
    JAVA=$best/bin/java
}

# Runs the Maven wrapper of the checkout at $1 with the remaining arguments, using $JAVA_HOME.
# Maven 3.9's bundled Guice calls sun.misc.Unsafe, which JDK 25 warns about on every run; allow it.
mvnw_in() {
    local root=$1
    shift
    (cd "$root" && MAVEN_OPTS="${MAVEN_OPTS:-} --sun-misc-unsafe-memory-access=allow" ./mvnw "$@")
}

# Whether a pom.xml, or a file under a src/ or native/ directory, of the checkout at $1 is newer than
# the file $2 (build outputs, .git and dist are not looked at).
sources_newer_than() {
    local root=$1 stamp=$2
    [[ -n $(find "$root" \( -name target -o -name .git -o -name dist -o -name node_modules \) -prune -o \
        \( -name pom.xml -o -path '*/src/*' -o -path '*/native/*' \) -type f -newer "$stamp" -print -quit) ]]
}
