/* Static aarch64 builds only (cmake/KeelDpdkStatic.cmake links this).
 *
 * Debian's static libpcap/libdbus reference libsystemd's socket-activation
 * helpers, and Debian ships no static libsystemd. keel is never started by
 * systemd socket activation, so "no sockets were passed" is the truth. */
int sd_listen_fds(int unset_environment);
int sd_is_socket(int fd, int family, int type, int listening);

int sd_listen_fds(int unset_environment)
{
    (void)unset_environment;
    return 0;
}

int sd_is_socket(int fd, int family, int type, int listening)
{
    (void)fd;
    (void)family;
    (void)type;
    (void)listening;
    return 0;
}
