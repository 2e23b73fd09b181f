"""A real LDAP directory for the tests: OpenLDAP's slapd (Debian's `slapd` package), a private
instance in a temporary folder on a free loopback port, never the system's own.

Its tree, under dc=example,dc=org:
  cn=admin            the root DN, which the tests change the directory as
  cn=chatsite         the service account the site searches with (it cannot read passwords)
  ou=people           one inetOrgPerson per user: uid, cn, givenName, sn, mail, userPassword
  ou=groups           one groupOfNames per group, listing its members' DNs
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import ldap

from tests.support.launch import stop_servers, wait_until_serving
from tests.support.servers import free_port

SCHEMAS = ("core", "cosine", "inetorgperson", "nis")
SCHEMA_DIR = Path("/etc/ldap/schema")
MODULE_DIR = Path("/usr/lib/ldap")
BASE_DN = "dc=example,dc=org"
ADMIN_DN = f"cn=admin,{BASE_DN}"
SERVICE_DN = f"cn=chatsite,{BASE_DN}"
PEOPLE_DN = f"ou=people,{BASE_DN}"
GROUPS_DN = f"ou=groups,{BASE_DN}"


def slapd_path() -> str | None:
    """slapd's path; it lives in /usr/sbin, which a non-root PATH often leaves out."""
    return shutil.which("slapd", path=f"{os.environ.get('PATH', '')}:/usr/sbin")


def ssha(password: str) -> str:
    """An {SSHA} userPassword (salted SHA-1), the scheme slapd checks binds against."""
    salt = secrets.token_bytes(8)
    digest = hashlib.sha1(password.encode() + salt).digest()
    return "{SSHA}" + base64.b64encode(digest + salt).decode()


@dataclass(frozen=True)
class Directory:
    """A running directory: where it is, the account the site binds as, and a way to change
    who is in which group while it runs (as its administrator)."""

    uri: str
    bind_dn: str
    bind_password: str
    admin_dn: str
    admin_password: str
    base_dn: str = BASE_DN
    people_dn: str = PEOPLE_DN
    groups_dn: str = GROUPS_DN

    def user_dn(self, uid: str) -> str:
        return f"uid={uid},{self.people_dn}"

    def group_dn(self, name: str) -> str:
        return f"cn={name},{self.groups_dn}"

    def add_to_group(self, uid: str, group: str) -> None:
        self._modify_members(group, ldap.MOD_ADD, uid)

    def remove_from_group(self, uid: str, group: str) -> None:
        self._modify_members(group, ldap.MOD_DELETE, uid)

    def _modify_members(self, group: str, operation: int, uid: str) -> None:
        connection = ldap.initialize(self.uri, bytes_mode=False)
        try:
            connection.simple_bind_s(self.admin_dn, self.admin_password)
            member = self.user_dn(uid).encode()
            connection.modify_s(self.group_dn(group), [(operation, "member", [member])])
        finally:
            connection.unbind_s()


def slapd_conf(folder: Path, admin_password: str) -> str:
    includes = "".join(f"include {SCHEMA_DIR / name}.schema\n" for name in SCHEMAS)
    # Passwords: anyone may bind with them, nobody may read them. The rest: readable once bound
    # (the service account, or a user checking their own entry), not anonymously.
    return f"""{includes}
modulepath {MODULE_DIR}
moduleload back_mdb
pidfile {folder / "slapd.pid"}
argsfile {folder / "slapd.args"}

database mdb
maxsize 16777216
suffix "{BASE_DN}"
rootdn "{ADMIN_DN}"
rootpw {ssha(admin_password)}
directory {folder / "data"}
index objectClass eq
index uid eq
index member eq

access to attrs=userPassword
    by anonymous auth
    by * none
access to *
    by users read
    by * none
"""


def entries_ldif(
    users: Mapping[str, str], groups: Mapping[str, Sequence[str]], service_password: str
) -> str:
    """The tree's entries, parents first (slapadd adds them in order)."""
    entries = [
        f"dn: {BASE_DN}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\n"
        "o: Example\n",
        f"dn: {SERVICE_DN}\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\n"
        f"cn: chatsite\nuserPassword: {ssha(service_password)}\n",
        f"dn: {PEOPLE_DN}\nobjectClass: organizationalUnit\nou: people\n",
        f"dn: {GROUPS_DN}\nobjectClass: organizationalUnit\nou: groups\n",
    ]
    for uid, password in users.items():
        given = uid.capitalize()
        entries.append(
            f"dn: uid={uid},{PEOPLE_DN}\nobjectClass: inetOrgPerson\nuid: {uid}\n"
            f"cn: {given} Example\ngivenName: {given}\nsn: Example\nmail: {uid}@example.org\n"
            f"userPassword: {ssha(password)}\n"
        )
    for name, members in groups.items():
        # groupOfNames must have a member: the root DN holds the place, so a group stays when
        # its last person leaves it (remove_from_group) and counts nobody the site signs in.
        lines = "".join(f"member: uid={uid},{PEOPLE_DN}\n" for uid in members)
        entries.append(
            f"dn: cn={name},{GROUPS_DN}\nobjectClass: groupOfNames\ncn: {name}\n"
            f"member: {ADMIN_DN}\n{lines}"
        )
    return "\n".join(entries)


def answers_binds(uri: str, dn: str, password: str) -> bool:
    connection = ldap.initialize(uri, bytes_mode=False)
    connection.set_option(ldap.OPT_NETWORK_TIMEOUT, 1.0)
    try:
        connection.simple_bind_s(dn, password)
    except ldap.LDAPError:
        return False
    finally:
        connection.unbind_s()
    return True


@contextmanager
def ldap_directory(
    *, users: Mapping[str, str], groups: Mapping[str, Sequence[str]] | None = None
) -> Iterator[Directory]:
    """A slapd serving `users` (uid: password) and `groups` (name: member uids), once it
    answers binds; stopped, and its folder removed, when the block ends."""
    slapd = slapd_path()
    if slapd is None:
        raise RuntimeError("slapd is not installed (Debian: apt-get install slapd)")
    admin_password = secrets.token_urlsafe(12)
    service_password = secrets.token_urlsafe(12)
    with tempfile.TemporaryDirectory(prefix="slapd-") as name:
        folder = Path(name)
        (folder / "data").mkdir()
        conf = folder / "slapd.conf"
        conf.write_text(slapd_conf(folder, admin_password))
        ldif = folder / "entries.ldif"
        ldif.write_text(entries_ldif(users, groups or {}, service_password))
        # Loaded offline, before slapd serves: no window where the tree is half there.
        subprocess.run(
            [slapd, "-T", "add", "-f", str(conf), "-l", str(ldif)],
            check=True,
            capture_output=True,
            timeout=30,
        )
        uri = f"ldap://127.0.0.1:{free_port()}/"
        log = folder / "slapd.log"
        with log.open("wb") as output:
            # -d: stays in the foreground as this child, so stopping it is a SIGTERM; run as
            # whoever runs the tests (root in CI too), it needs no -u/-g of its own.
            process = subprocess.Popen(
                [slapd, "-f", str(conf), "-h", uri, "-d", "0"],
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_until_serving(
                process,
                lambda: answers_binds(uri, ADMIN_DN, admin_password),
                name="slapd",
                log=log.read_text,
                timeout=30,
            )
            yield Directory(
                uri=uri,
                bind_dn=SERVICE_DN,
                bind_password=service_password,
                admin_dn=ADMIN_DN,
                admin_password=admin_password,
            )
        finally:
            stop_servers([process], grace=5)
