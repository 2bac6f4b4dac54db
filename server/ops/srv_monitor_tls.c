#include "srv_monitor_tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"

/* Certificate and key in memory, for libmicrohttpd, which wants PEM text
 * that outlives the daemon. */
static char *cert_pem;
static char *key_pem;
static struct MHD_OptionItem tls_opts[3];
static const struct MHD_OptionItem no_opts[1] = {{MHD_OPTION_END, 0, NULL}};

/* Read a whole PEM file (at most SRV_MON_TLS_PEM_BYTES_MAX) into *out. */
static int read_pem(const char *path, char **out, char *errmsg)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;

    if (f == NULL) {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "https: cannot read %s: check tls { cert_file, "
                        "key_file }",
                        path);
    }
    buf = malloc(SRV_MON_TLS_PEM_BYTES_MAX + 1);
    size_t n = buf != NULL ? fread(buf, 1, SRV_MON_TLS_PEM_BYTES_MAX, f) : 0;
    bool more = buf != NULL && fgetc(f) != EOF;
    fclose(f);
    if (buf == NULL) {
        return KEEL_ENOMEM;
    }
    if (n == 0 || more) {
        free(buf);
        return keel_err(KEEL_ECONFIG, errmsg,
                        "https: %s is empty or larger than %d bytes", path,
                        SRV_MON_TLS_PEM_BYTES_MAX);
    }
    buf[n] = '\0';
    *out = buf;
    return 0;
}

int srv_monitor_tls_options(const struct srv_config *cfg, unsigned *flags,
                            const struct MHD_OptionItem **opts, char *errmsg)
{
    *flags = 0;
    *opts = no_opts;
    if (!cfg->https) {
        return 0;
    }
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "https: this libmicrohttpd has no TLS support; use "
                        "http_port behind a TLS proxy");
    }
    if (cfg->tls_cert[0] == '\0' || cfg->tls_key[0] == '\0') {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "https needs a certificate and a key: set tls { "
                        "cert_file, key_file } (or --tlscert and --tlskey)");
    }
    if (cert_pem == NULL) {
        char *c = NULL, *k = NULL;
        int rv = read_pem(cfg->tls_cert, &c, errmsg);
        if (rv == 0) {
            rv = read_pem(cfg->tls_key, &k, errmsg);
        }
        if (rv != 0) {
            free(c);
            return rv;
        }
        cert_pem = c;
        key_pem = k;
    }
    tls_opts[0] =
        (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, cert_pem};
    tls_opts[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, key_pem};
    tls_opts[2] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    *flags = MHD_USE_TLS;
    *opts = tls_opts;
    return 0;
}
