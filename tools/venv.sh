# Sourced by the set-up scripts: new_venv PYTHON DIR makes a venv at DIR with the newest
# pip.  The interpreter's own pip installs it there (pip --python): `python -m venv`
# would first install its bundled pip and setuptools, then pip would replace itself, 7.5 s
# of CPU per venv against 2 on the 2-core machine, and CI makes about ten venvs.  An
# interpreter without pip 22.3 or newer gets the plain venv.  No setuptools: a script
# that builds installs it.
new_venv() {
    local py=$1 dir=$2
    if "$py" -m pip --version > /dev/null 2>&1 && "$py" -m venv --clear --without-pip "$dir" &&
        "$py" -m pip --python "$dir/bin/python" install -q --upgrade pip 2> /dev/null; then
        return 0
    fi
    "$py" -m venv --clear "$dir"
    "$dir/bin/python" -m pip install -q --upgrade pip
}

# use_venv PYTHON DIR: the venv at DIR, its pip upgraded, or a new one (new_venv).
use_venv() {
    if [ -x "$2/bin/python" ]; then
        "$2/bin/python" -m pip install -q --upgrade pip
    else
        new_venv "$1" "$2"
    fi
}
