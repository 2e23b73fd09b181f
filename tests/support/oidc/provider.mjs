// A real OpenID Provider for the single sign-on tests: panva's certified oidc-provider on a
// loopback port, with one confidential client and the provider's own development login form.
//
//   node provider.mjs --port 9000 --client-id chatsite --client-secret s3cret \
//     --redirect-uri http://127.0.0.1:8000/oidc/callback/ --users users.json
//
// Each option may come from the environment instead (OIDC_PORT, OIDC_CLIENT_ID, ...).
// --redirect-uri may repeat, or list several URIs separated by commas.
//
// users.json maps a login (what one types into the form; any password is accepted) to
// { "preferred_username", "name", "email", "groups": [...] }. The login is the person's `sub`
// (oidc-provider makes the account id the subject); preferred_username, unset, is the login too.
// The file is read again on every lookup, so a test can change someone's groups (or username)
// between two logins without restarting the provider.
//
// Once listening it prints one line, `ready <issuer>`, on stdout.

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import Provider from 'oidc-provider';

const { values: args } = parseArgs({
  options: {
    port: { type: 'string', default: process.env.OIDC_PORT },
    'client-id': { type: 'string', default: process.env.OIDC_CLIENT_ID },
    'client-secret': { type: 'string', default: process.env.OIDC_CLIENT_SECRET },
    'redirect-uri': { type: 'string', multiple: true },
    users: { type: 'string', default: process.env.OIDC_USERS },
  },
});
const redirectUris = (args['redirect-uri'] ?? [process.env.OIDC_REDIRECT_URIS ?? ''])
  .flatMap((value) => value.split(','))
  .map((value) => value.trim())
  .filter(Boolean);
const missing = ['port', 'client-id', 'client-secret', 'users'].filter((name) => !args[name]);
if (missing.length || !redirectUris.length) {
  console.error(`provider.mjs: missing ${[...missing, ...(redirectUris.length ? [] : ['redirect-uri'])].join(', ')}`);
  process.exit(2);
}

const port = Number(args.port);
const issuer = `http://127.0.0.1:${port}`;
const clientId = args['client-id'];

function readUser(login) {
  // Read on every lookup: the test rewrites the file to change someone's groups.
  const users = JSON.parse(readFileSync(args.users, 'utf8'));
  return Object.hasOwn(users, login) ? users[login] : undefined;
}

const provider = new Provider(issuer, {
  clients: [{
    client_id: clientId,
    client_secret: args['client-secret'],
    redirect_uris: redirectUris,
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  // A scope of its own for the groups, as many providers have: the relying party must ask.
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
    groups: ['groups'],
  },
  async findAccount(ctx, login) {
    const user = readUser(login);
    if (!user) {
      return undefined;
    }
    return {
      accountId: login,
      async claims() {
        // Claims come from the file as it is now, not as it was when the user signed in.
        const current = readUser(login) ?? user;
        return {
          sub: login,
          preferred_username: current.preferred_username ?? login,
          name: current.name ?? login,
          email: current.email,
          email_verified: Boolean(current.email),
          groups: current.groups ?? [],
        };
      },
    };
  },
  // The one client is first-party: grant what it asks without the consent screen, so a login is
  // the provider's login form only.
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId
      || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) {
      const existing = await ctx.oidc.provider.Grant.find(grantId);
      if (existing) {
        return existing;
      }
    }
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope(ctx.oidc.params.scope);
    await grant.save();
    return grant;
  },
  // The relying party must prove it started the login (PKCE), confidential client or not.
  pkce: { required: () => true },
  cookies: { keys: ['tests-only-cookie-key'] },
  features: { devInteractions: { enabled: true } },
});

const server = provider.listen(port, '127.0.0.1', () => {
  console.log(`ready ${issuer}`);
});

function stop() {
  server.close(() => process.exit(0));
  // Open keep-alive connections would hold close() up.
  server.closeAllConnections?.();
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
