"""keel's SSH server against a second client nobody here wrote: paramiko
(Debian's python3-paramiko, issue 17).

The same keel as test_ssh_openssh.py (ssh_common.KeelTarget). Asserted:
  * a login with the ECDSA key and one with the RSA key (rsa-sha2-*), each
    running `show ports`: its output, exit status 0;
  * a login with the read-only user's password (auth_password) and with
    keyboard-interactive (paramiko's handler answering the one prompt): the
    command runs; a wrong password raises AuthenticationException;
  * an unknown command: exit status non-zero, the message on stderr;
  * the host key paramiko saw is the one `show ssh host-key` prints;
  * two exec channels on the one connection, one after the other.

SSH_TARGET=sshd runs the key logins against a private sshd (the client side
checked against OpenSSH); the password checks are keel-only."""
import base64
import hashlib

from ssh_common import (PATIENCE, SSH_KEYGEN, VIEWER_PASSWORD, KeelTarget, Keys, check, cleanup, main,
                        make_target, require, workdir)

T = None


def client_for(user, pkey=None, password=None, disabled_algorithms=None):
    import paramiko
    c = paramiko.SSHClient()
    c.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    c.connect(T.host, T.port, username=user, pkey=pkey, password=password, look_for_keys=False,
              allow_agent=False, timeout=PATIENCE, banner_timeout=PATIENCE, auth_timeout=PATIENCE,
              disabled_algorithms=disabled_algorithms)
    return c


def exec_on(c, command):
    """(status, stdout, stderr) of one exec channel on client c."""
    chan = c.get_transport().open_session(timeout=PATIENCE)
    chan.settimeout(PATIENCE)
    chan.exec_command(command)
    out = chan.makefile("rb").read().decode()
    err = chan.makefile_stderr("rb").read().decode()
    status = chan.recv_exit_status()
    chan.close()
    return status, out, err


def test_key_logins():
    import paramiko
    for path, cls in ((T.keys.ecdsa.path, paramiko.ECDSAKey), (T.keys.rsa.path, paramiko.RSAKey)):
        c = client_for(T.admin, pkey=cls.from_private_key_file(path))
        try:
            status, out, err = exec_on(c, T.ok_command)
            check(status == 0 and T.ok_marker in out, "%s key: %r -> %d %r %r" % (cls.__name__, T.ok_command,
                                                                               status, out, err))
            status, out, err = exec_on(c, T.bad_command)
            check(status != 0 and T.bad_marker in err and T.bad_marker not in out,
                  "unknown command on the same connection: %d %r %r" % (status, out, err))
            # The host key paramiko verified, as ssh-keygen -l prints it.
            hk = c.get_transport().get_remote_server_key()
            fp = "SHA256:" + base64.b64encode(hashlib.sha256(hk.asbytes()).digest()).decode().rstrip("=")
            if isinstance(T, KeelTarget):
                shown = T.console("show ssh host-key")
                check(fp in shown, "paramiko's host key %s is in show ssh host-key:\n%s" % (fp, shown))
        finally:
            c.close()
    # A key nobody has.
    try:
        client_for(T.admin, pkey=paramiko.ECDSAKey.from_private_key_file(T.keys.wrong.path)).close()
        check(False, "a key nobody has was accepted")
    except paramiko.AuthenticationException:
        pass


def test_password_logins():
    import paramiko
    if not isinstance(T, KeelTarget):
        print("  (passwords: keel only)")
        return
    c = client_for(T.viewer, password=VIEWER_PASSWORD)
    try:
        status, out, err = exec_on(c, T.ok_command)
        check(status == 0 and T.ok_marker in out, "password login runs the command: %d %r %r" % (status, out, err))
        status, out, err = exec_on(c, T.change_command)
        check(status != 0 and "permission denied" in err, "read-only: %d %r %r" % (status, out, err))
    finally:
        c.close()
    # keyboard-interactive: one "Password: " prompt, answered.
    t = paramiko.Transport((T.host, T.port))
    try:
        t.banner_timeout = PATIENCE
        t.start_client(timeout=PATIENCE)
        prompts = []

        def handler(title, instructions, prompt_list):
            prompts.extend(p for p, _ in prompt_list)
            return [VIEWER_PASSWORD for _ in prompt_list]
        t.auth_interactive(T.viewer, handler)
        check(t.is_authenticated(), "keyboard-interactive authenticated")
        check(prompts == ["Password: "], "one Password: prompt: %r" % prompts)
        chan = t.open_session(timeout=PATIENCE)
        chan.exec_command(T.ok_command)
        out = chan.makefile("rb").read().decode()
        check(chan.recv_exit_status() == 0 and T.ok_marker in out, "kbd-interactive session: %r" % out)
    finally:
        t.close()
    try:
        client_for(T.viewer, password="wrong").close()
        check(False, "a wrong password was accepted")
    except paramiko.AuthenticationException:
        pass


if __name__ == "__main__":
    require("test_ssh_paramiko", SSH_KEYGEN)
    try:
        import paramiko  # noqa: F401
    except ImportError:
        from ssh_common import skip
        skip("test_ssh_paramiko", "no paramiko under this python (python3-paramiko; run with /usr/bin/python3)")
    d = workdir()
    try:
        keys = Keys(d)
        T = make_target(d, keys)
        main([test_key_logins, test_password_logins])
    finally:
        cleanup(d, *([T] if T else []))
