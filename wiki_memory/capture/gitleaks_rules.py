"""gitleaks' default rules, translated to Python ``re``: GENERATED, do not edit.

Regenerate with ``python scripts/gen_gitleaks_rules.py`` (see docs/sanitizer.md).
Source: gitleaks.toml, gitleaks config, minVersion v8.25.0.

Each rule: (id, regex, keywords, entropy, secret_group, allowlists, path, then the
numbers read from its parsed regex: run_length, lead_run, max_width,
keyword_in_match, starts); the tables below ``RULES`` are made from them.
``regex`` is compiled with ``re.ASCII``; ``keywords`` are lowercase, one of them
must occur in the lowercased text; ``entropy`` is the least Shannon entropy of the
secret (0: none); ``secret_group`` 0 means the first non-empty group, else the whole
match; an allowlist is (target, condition, regexes, stopwords, paths); ``path``, when
set, is a regex the file path must match (the rule applies nowhere else).

The rules are from gitleaks (https://github.com/gitleaks/gitleaks), under its
licence:

MIT License

Copyright (c) 2019 Zachary Rice

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
"""

# ruff: noqa: E501
# fmt: off

RULES = (
    ('1password-secret-key', '\\bA3-[A-Z0-9]{6}-(?:(?:[A-Z0-9]{11})|(?:[A-Z0-9]{6}-[A-Z0-9]{5}))-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}\\b', ('a3-',), 3.8, 0, (), None, 39, 39, 40, True, ('a3-',)),
    ('1password-service-account-token', 'ops_eyJ[a-zA-Z0-9+/]{250,}={0,3}', ('ops_',), 4.0, 0, (), None, 257, 257, 0, True, ('ops_eyj',)),
    ('adafruit-api-key', '(?i)[\\w.-]{0,50}?(?:adafruit)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9_-]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('adafruit',), 0.0, 0, (), None, 32, 8, 124, True, ()),
    ('adobe-client-id', '(?i)[\\w.-]{0,50}?(?:adobe)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('adobe',), 2.0, 0, (), None, 32, 5, 121, True, ()),
    ('adobe-client-secret', '\\b(p8e-(?i:[a-z0-9]{32}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('p8e-',), 2.0, 0, (), None, 36, 36, 38, True, ('p8e-',)),
    ('age-secret-key', 'AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}', ('age-secret-key-1',), 0.0, 0, (), None, 74, 74, 74, True, ('age-secret-key-1',)),
    ('airtable-api-key', '(?i)[\\w.-]{0,50}?(?:airtable)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{17})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('airtable',), 0.0, 0, (), None, 17, 8, 109, True, ()),
    ('airtable-personnal-access-token', '\\b(pat[A-Za-z0-9]{14}\\.[a-f0-9]{64})\\b', ('airtable',), 0.0, 0, (), None, 82, 82, 82, False, ('pat',)),
    ('algolia-api-key', '(?i)[\\w.-]{0,50}?(?:algolia)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('algolia',), 0.0, 0, (), None, 32, 7, 123, True, ()),
    ('alibaba-access-key-id', '\\b(LTAI(?i:[a-z0-9]{20}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('ltai',), 2.0, 0, (), None, 24, 24, 26, True, ('ltai',)),
    ('alibaba-secret-key', '(?i)[\\w.-]{0,50}?(?:alibaba)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{30})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('alibaba',), 2.0, 0, (), None, 30, 7, 121, True, ()),
    ('anthropic-admin-api-key', '\\b(sk-ant-admin01-[a-zA-Z0-9_\\-]{93}AA)(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sk-ant-admin01',), 0.0, 0, (), None, 110, 110, 112, True, ('sk-ant-admin01-',)),
    ('anthropic-api-key', '\\b(sk-ant-api03-[a-zA-Z0-9_\\-]{93}AA)(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sk-ant-api03',), 0.0, 0, (), None, 108, 108, 110, True, ('sk-ant-api03-',)),
    ('artifactory-api-key', '\\bAKCp[A-Za-z0-9]{69}\\b', ('akcp',), 4.5, 0, (), None, 73, 73, 73, True, ('akcp',)),
    ('artifactory-reference-token', '\\bcmVmd[A-Za-z0-9]{59}\\b', ('cmvmd',), 4.5, 0, (), None, 64, 64, 64, True, ('cmvmd',)),
    ('asana-client-id', '(?i)[\\w.-]{0,50}?(?:asana)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9]{16})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('asana',), 0.0, 0, (), None, 16, 5, 105, True, ()),
    ('asana-client-secret', '(?i)[\\w.-]{0,50}?(?:asana)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('asana',), 0.0, 0, (), None, 32, 5, 121, True, ()),
    ('atlassian-api-token', '(?i)[\\w.-]{0,50}?(?:(?-i:ATLASSIAN|[Aa]tlassian)|(?-i:CONFLUENCE|[Cc]onfluence)|(?-i:JIRA|[Jj]ira))(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{20}[a-f0-9]{4})(?:[\\x60\'"\\s;]|\\\\[nr]|$)|\\b(ATATT3[A-Za-z0-9_\\-=]{186})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('atlassian', 'confluence', 'jira', 'atatt3'), 3.5, 0, (), None, 24, 4, 194, True, ()),
    ('authress-service-client-access-key', '\\b((?:sc|ext|scauth|authress)_(?i:[a-z0-9]{5,30}\\.[a-z0-9]{4,6}\\.(?-i:acc)[_-][a-z0-9-]{10,32}\\.[a-z0-9+/_=-]{30,120}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sc_', 'ext_', 'scauth_', 'authress_'), 2.0, 0, (), None, 59, 59, 206, True, ('authress_', 'ext_', 'sc_', 'scauth_')),
    ('aws-access-token', '\\b((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\\b', ('a3t', 'akia', 'asia', 'abia', 'acca'), 3.0, 0, (('secret', 'OR', ('.{1,1024}EXAMPLE$',), (), ()),), None, 20, 20, 20, True, ('a3t', 'abia', 'acca', 'akia', 'asia')),
    ('aws-amazon-bedrock-api-key-long-lived', '\\b(ABSK[A-Za-z0-9+/]{109,269}={0,2})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('absk',), 3.0, 0, (), None, 113, 113, 277, True, ('absk',)),
    ('aws-amazon-bedrock-api-key-short-lived', 'bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t', ('bedrock-api-key-',), 3.0, 0, (), None, 44, 44, 44, True, ('bedrock-api-key-ymvkcm9jay5hbwf6b25hd3muy29t',)),
    ('azure-ad-client-secret', '(?:^|[\\\\\'"\\x60\\s>=:(,)])([a-zA-Z0-9_~.]{3}\\dQ~[a-zA-Z0-9_~.-]{31,34})(?:$|[\\\\\'"\\x60\\s<),])', ('q~',), 3.0, 0, (), None, 37, 0, 42, True, ()),
    ('beamer-api-token', '(?i)[\\w.-]{0,50}?(?:beamer)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(b_[a-z0-9=_\\-]{44})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('beamer',), 0.0, 0, (), None, 46, 6, 136, True, ()),
    ('bitbucket-client-id', '(?i)[\\w.-]{0,50}?(?:bitbucket)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('bitbucket',), 0.0, 0, (), None, 32, 9, 125, True, ()),
    ('bitbucket-client-secret', '(?i)[\\w.-]{0,50}?(?:bitbucket)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9=_\\-]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('bitbucket',), 0.0, 0, (), None, 64, 9, 157, True, ()),
    ('bittrex-access-key', '(?i)[\\w.-]{0,50}?(?:bittrex)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('bittrex',), 0.0, 0, (), None, 32, 7, 123, True, ()),
    ('bittrex-secret-key', '(?i)[\\w.-]{0,50}?(?:bittrex)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('bittrex',), 0.0, 0, (), None, 32, 7, 123, True, ()),
    ('cisco-meraki-api-key', '[\\w.-]{0,50}?(?i:[\\w.-]{0,50}?(?:(?-i:[Mm]eraki|MERAKI))(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3})(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9a-f]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('meraki',), 3.0, 0, (), None, 40, 6, 180, True, ()),
    ('clickhouse-cloud-api-secret-key', '\\b(4b1d[A-Za-z0-9]{38})\\b', ('4b1d',), 3.0, 0, (), None, 42, 42, 42, True, ('4b1d',)),
    ('clojars-api-token', '(?i)CLOJARS_[a-z0-9]{60}', ('clojars_',), 2.0, 0, (), None, 68, 68, 68, True, ('clojars_',)),
    ('cloudflare-api-key', '(?i)[\\w.-]{0,50}?(?:cloudflare)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9_-]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('cloudflare',), 2.0, 0, (), None, 40, 10, 134, True, ()),
    ('cloudflare-global-api-key', '(?i)[\\w.-]{0,50}?(?:cloudflare)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{37})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('cloudflare',), 2.0, 0, (), None, 37, 10, 131, True, ()),
    ('cloudflare-origin-ca-key', '\\b(v1\\.0-[a-f0-9]{24}-[a-f0-9]{146})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('cloudflare', 'v1.0-'), 2.0, 0, (), None, 176, 176, 178, True, ('v1.0-',)),
    ('codecov-access-token', '(?i)[\\w.-]{0,50}?(?:codecov)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('codecov',), 0.0, 0, (), None, 32, 7, 123, True, ()),
    ('cohere-api-token', '[\\w.-]{0,50}?(?i:[\\w.-]{0,50}?(?:cohere|CO_API_KEY)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3})(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-zA-Z0-9]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('cohere', 'co_api_key'), 4.0, 0, (), None, 40, 6, 184, True, ()),
    ('coinbase-access-token', '(?i)[\\w.-]{0,50}?(?:coinbase)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9_-]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('coinbase',), 0.0, 0, (), None, 64, 8, 156, True, ()),
    ('confluent-access-token', '(?i)[\\w.-]{0,50}?(?:confluent)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{16})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('confluent',), 0.0, 0, (), None, 16, 9, 109, True, ()),
    ('confluent-secret-key', '(?i)[\\w.-]{0,50}?(?:confluent)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('confluent',), 0.0, 0, (), None, 64, 9, 157, True, ()),
    ('contentful-delivery-api-token', '(?i)[\\w.-]{0,50}?(?:contentful)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9=_\\-]{43})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('contentful',), 0.0, 0, (), None, 43, 10, 137, True, ()),
    ('curl-auth-header', '\\bcurl\\b(?:.{0,1024}?|.{0,1024}?(?:[\\r\\n]{1,2}.{0,1024}?){1,5})[ \\t\\n\\r](?:-H|--header)(?:=|[ \\t]{0,5})(?:"(?i:(?:Authorization:[ \\t]{0,5}(?:Basic[ \\t]([a-z0-9+/]{8,}={0,3})|(?:Bearer|(?:Api-)?Token)[ \\t]([\\w=~@.+/-]{8,})|([\\w=~@.+/-]{8,}))|(?:(?:X-(?:[a-z]+-)?)?(?:Api-?)?(?:Key|Token)):[ \\t]{0,5}([\\w=~@.+/-]{8,}))")|(?i:\'(?i:(?:Authorization:[ \\t]{0,5}(?:Basic[ \\t]([a-z0-9+/]{8,}={0,3})|(?:Bearer|(?:Api-)?Token)[ \\t]([\\w=~@.+/-]{8,})|([\\w=~@.+/-]{8,}))|(?:(?:X-(?:[a-z]+-)?)?(?:Api-?)?(?:Key|Token)):[ \\t]{0,5}([\\w=~@.+/-]{8,}))\')))(?:\\B|\\s|\\Z)', ('curl',), 2.75, 0, (), None, 4, 4, 0, True, ('curl',)),
    ('curl-auth-user', '\\bcurl\\b(?:.{0,1024}|.{0,1024}(?:[\\r\\n]{1,2}.{0,1024}){1,5})[ \\t\\n\\r](?:-u|--user)(?:=|[ \\t]{0,5})("(:[^"]{3,}|[^:"]{3,}:|[^:"]{3,}:[^"]{3,})"|\'([^:\']{3,}:[^\']{3,})\'|((?:"[^"]{3,}"|\'[^\']{3,}\'|[\\w$@.-]+):(?:"[^"]{3,}"|\'[^\']{3,}\'|[\\w${}@.-]+)))(?:\\s|\\Z)', ('curl',), 2.0, 0, (('secret', 'OR', ('[^:]+:(?:change(?:it|me)|pass(?:word)?|pwd|test|token|\\*+|x+)', '[\'"]?<[^>]+>[\'"]?:[\'"]?<[^>]+>|<[^:]+:[^>]+>[\'"]?', '[^:]+:\\[[^\\]]+]', '[\'"]?[^:]+[\'"]?:[\'"]?\\$(?:\\d|\\w+|\\{(?:\\d|\\w+)})[\'"]?', '\\$\\([^)]+\\):\\$\\([^)]+\\)', '[\'"]?\\$?{{[^}]+}}[\'"]?:[\'"]?\\$?{{[^}]+}}[\'"]?'), (), ()),), None, 4, 4, 0, True, ('curl',)),
    ('databricks-api-token', '\\b(dapi[a-f0-9]{32}(?:-\\d)?)(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('dapi',), 3.0, 0, (), None, 36, 36, 40, True, ('dapi',)),
    ('datadog-access-token', '(?i)[\\w.-]{0,50}?(?:datadog)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('datadog',), 0.0, 0, (), None, 40, 7, 131, True, ()),
    ('defined-networking-api-token', '(?i)[\\w.-]{0,50}?(?:dnkey)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(dnkey-[a-z0-9=_\\-]{26}-[a-z0-9=_\\-]{52})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('dnkey',), 0.0, 0, (), None, 85, 5, 174, True, ()),
    ('digitalocean-access-token', '\\b(doo_v1_[a-f0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('doo_v1_',), 3.0, 0, (), None, 71, 71, 73, True, ('doo_v1_',)),
    ('digitalocean-pat', '\\b(dop_v1_[a-f0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('dop_v1_',), 3.0, 0, (), None, 71, 71, 73, True, ('dop_v1_',)),
    ('digitalocean-refresh-token', '(?i)\\b(dor_v1_[a-f0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('dor_v1_',), 0.0, 0, (), None, 71, 71, 73, True, ('dor_v1_',)),
    ('discord-api-token', '(?i)[\\w.-]{0,50}?(?:discord)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('discord',), 0.0, 0, (), None, 64, 7, 155, True, ()),
    ('discord-client-id', '(?i)[\\w.-]{0,50}?(?:discord)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9]{18})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('discord',), 2.0, 0, (), None, 18, 7, 109, True, ()),
    ('discord-client-secret', '(?i)[\\w.-]{0,50}?(?:discord)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9=_\\-]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('discord',), 2.0, 0, (), None, 32, 7, 123, True, ()),
    ('doppler-api-token', 'dp\\.pt\\.(?i:[a-z0-9]{43})', ('dp.pt.',), 2.0, 0, (), None, 49, 49, 49, True, ('dp.pt.',)),
    ('droneci-access-token', '(?i)[\\w.-]{0,50}?(?:droneci)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('droneci',), 0.0, 0, (), None, 32, 7, 123, True, ()),
    ('dropbox-api-token', '(?i)[\\w.-]{0,50}?(?:dropbox)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{15})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('dropbox',), 0.0, 0, (), None, 15, 7, 106, True, ()),
    ('dropbox-long-lived-api-token', '(?i)[\\w.-]{0,50}?(?:dropbox)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{11}(AAAAAAAAAA)[a-z0-9\\-_=]{43})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('dropbox',), 0.0, 0, (), None, 64, 7, 155, True, ()),
    ('dropbox-short-lived-api-token', '(?i)[\\w.-]{0,50}?(?:dropbox)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(sl\\.[a-z0-9\\-=_]{135})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('dropbox',), 0.0, 0, (), None, 138, 7, 229, True, ()),
    ('duffel-api-token', 'duffel_(?:test|live)_(?i:[a-z0-9_\\-=]{43})', ('duffel_',), 2.0, 0, (), None, 55, 55, 55, True, ('duffel_live_', 'duffel_test_')),
    ('dynatrace-api-token', 'dt0c01\\.(?i:[a-z0-9]{24}\\.[a-z0-9]{64})', ('dt0c01.',), 4.0, 0, (), None, 96, 96, 96, True, ('dt0c01.',)),
    ('easypost-api-token', '\\bEZAK(?i:[a-z0-9]{54}\\b)', ('ezak',), 2.0, 0, (), None, 58, 58, 58, True, ('ezak',)),
    ('easypost-test-api-token', '\\bEZTK(?i:[a-z0-9]{54}\\b)', ('eztk',), 2.0, 0, (), None, 58, 58, 58, True, ('eztk',)),
    ('etsy-access-token', '(?i)[\\w.-]{0,50}?(?:(?-i:ETSY|[Ee]tsy))(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{24})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('etsy',), 3.0, 0, (), None, 24, 4, 112, True, ()),
    ('facebook-access-token', '(?i)\\b(\\d{15,16}(\\||%)[0-9a-z\\-_]{27,40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('facebook',), 3.0, 0, (), None, 27, 15, 59, False, ()),
    ('facebook-page-access-token', '\\b(EAA[MC](?i:[a-z0-9]{100,}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('eaam', 'eaac'), 4.0, 0, (), None, 104, 104, 0, True, ('eaac', 'eaam')),
    ('facebook-secret', '(?i)[\\w.-]{0,50}?(?:facebook)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('facebook',), 3.0, 0, (), None, 32, 8, 124, True, ()),
    ('fastly-api-token', '(?i)[\\w.-]{0,50}?(?:fastly)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9=_\\-]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('fastly',), 0.0, 0, (), None, 32, 6, 122, True, ()),
    ('finicity-api-token', '(?i)[\\w.-]{0,50}?(?:finicity)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('finicity',), 0.0, 0, (), None, 32, 8, 124, True, ()),
    ('finicity-client-secret', '(?i)[\\w.-]{0,50}?(?:finicity)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{20})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('finicity',), 0.0, 0, (), None, 20, 8, 112, True, ()),
    ('finnhub-access-token', '(?i)[\\w.-]{0,50}?(?:finnhub)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{20})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('finnhub',), 0.0, 0, (), None, 20, 7, 111, True, ()),
    ('flickr-access-token', '(?i)[\\w.-]{0,50}?(?:flickr)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('flickr',), 0.0, 0, (), None, 32, 6, 122, True, ()),
    ('flutterwave-encryption-key', 'FLWSECK_TEST-(?i:[a-h0-9]{12})', ('flwseck_test',), 2.0, 0, (), None, 25, 25, 25, True, ('flwseck_test-',)),
    ('flutterwave-public-key', 'FLWPUBK_TEST-(?i:[a-h0-9]{32}-X)', ('flwpubk_test',), 2.0, 0, (), None, 47, 47, 47, True, ('flwpubk_test-',)),
    ('flutterwave-secret-key', 'FLWSECK_TEST-(?i:[a-h0-9]{32}-X)', ('flwseck_test',), 2.0, 0, (), None, 47, 47, 47, True, ('flwseck_test-',)),
    ('flyio-access-token', '\\b((?:fo1_[\\w-]{43}|fm1[ar]_[a-zA-Z0-9+\\/]{100,}={0,3}|fm2_[a-zA-Z0-9+\\/]{100,}={0,3}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('fo1_', 'fm1', 'fm2_'), 4.0, 0, (), None, 47, 47, 0, True, ('fm1a_', 'fm1r_', 'fm2_', 'fo1_')),
    ('frameio-api-token', 'fio-u-(?i:[a-z0-9\\-_=]{64})', ('fio-u-',), 0.0, 0, (), None, 70, 70, 70, True, ('fio-u-',)),
    ('freemius-secret-key', '(?i)["\']secret_key["\']\\s*=>\\s*["\'](sk_[\\S]{29})["\']', ('secret_key',), 0.0, 0, (), '(?i)\\.php$', 10, 0, 0, True, ('"secret_key"', '"secret_key\'', '\'secret_key"', "'secret_key'")),
    ('freshbooks-access-token', '(?i)[\\w.-]{0,50}?(?:freshbooks)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('freshbooks',), 0.0, 0, (), None, 64, 10, 158, True, ()),
    ('gcp-api-key', '\\b(AIza[\\w-]{35})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('aiza',), 4.0, 0, (('secret', 'OR', ('AIzaSyabcdefghijklmnopqrstuvwxyz1234567', 'AIzaSyAnLA7NfeLquW1tJFpx_eQCxoX-oo6YyIs', 'AIzaSyCkEhVjf3pduRDt6d1yKOMitrUEke8agEM', 'AIzaSyDMAScliyLx7F0NPDEJi1QmyCgHIAODrlU', 'AIzaSyD3asb-2pEZVqMkmL6M9N6nHZRR_znhrh0', 'AIzayDNSXIbFmlXbIE6mCzDLQAqITYefhixbX4A', 'AIzaSyAdOS2zB6NCsk1pCdZ4-P6GBdi_UUPwX7c', 'AIzaSyASWm6HmTMdYWpgMnjRBjxcQ9CKctWmLd4', 'AIzaSyANUvH9H9BsUccjsu2pCmEkOPjjaXeDQgY', 'AIzaSyA5_iVawFQ8ABuTZNUdcwERLJv_a_p4wtM', 'AIzaSyA4UrcGxgwQFTfaI3no3t7Lt1sjmdnP5sQ', 'AIzaSyDSb51JiIcB6OJpwwMicseKRhhrOq1cS7g', 'AIzaSyBF2RrAIm4a0mO64EShQfqfd2AFnzAvvuU', 'AIzaSyBcE-OOIbhjyR83gm4r2MFCu4MJmprNXsw', 'AIzaSyB8qGxt4ec15vitgn44duC5ucxaOi4FmqE', 'AIzaSyA8vmApnrHNFE0bApF4hoZ11srVL_n0nvY'), (), ()),), None, 39, 39, 41, True, ('aiza',)),
    ('github-app-token', '(?:ghu|ghs)_[0-9a-zA-Z]{36}', ('ghu_', 'ghs_'), 3.0, 0, (('secret', 'OR', (), (), ('(?:^|/)@octokit/auth-token/README\\.md$',)),), None, 40, 40, 40, True, ('ghs_', 'ghu_')),
    ('github-fine-grained-pat', 'github_pat_\\w{82}', ('github_pat_',), 3.0, 0, (), None, 93, 93, 93, True, ('github_pat_',)),
    ('github-oauth', 'gho_[0-9a-zA-Z]{36}', ('gho_',), 3.0, 0, (), None, 40, 40, 40, True, ('gho_',)),
    ('github-pat', 'ghp_[0-9a-zA-Z]{36}', ('ghp_',), 3.0, 0, (('secret', 'OR', (), (), ('(?:^|/)@octokit/auth-token/README\\.md$',)),), None, 40, 40, 40, True, ('ghp_',)),
    ('github-refresh-token', 'ghr_[0-9a-zA-Z]{36}', ('ghr_',), 3.0, 0, (), None, 40, 40, 40, True, ('ghr_',)),
    ('gitlab-cicd-job-token', 'glcbt-[0-9a-zA-Z]{1,5}_[0-9a-zA-Z_-]{20}', ('glcbt-',), 3.0, 0, (), None, 28, 28, 32, True, ('glcbt-',)),
    ('gitlab-deploy-token', 'gldt-[0-9a-zA-Z_\\-]{20}', ('gldt-',), 3.0, 0, (), None, 25, 25, 25, True, ('gldt-',)),
    ('gitlab-feature-flag-client-token', 'glffct-[0-9a-zA-Z_\\-]{20}', ('glffct-',), 3.0, 0, (), None, 27, 27, 27, True, ('glffct-',)),
    ('gitlab-feed-token', 'glft-[0-9a-zA-Z_\\-]{20}', ('glft-',), 3.0, 0, (), None, 25, 25, 25, True, ('glft-',)),
    ('gitlab-incoming-mail-token', 'glimt-[0-9a-zA-Z_\\-]{25}', ('glimt-',), 3.0, 0, (), None, 31, 31, 31, True, ('glimt-',)),
    ('gitlab-kubernetes-agent-token', 'glagent-[0-9a-zA-Z_\\-]{50}', ('glagent-',), 3.0, 0, (), None, 58, 58, 58, True, ('glagent-',)),
    ('gitlab-oauth-app-secret', 'gloas-[0-9a-zA-Z_\\-]{64}', ('gloas-',), 3.0, 0, (), None, 70, 70, 70, True, ('gloas-',)),
    ('gitlab-pat', 'glpat-[\\w-]{20}', ('glpat-',), 3.0, 0, (), None, 26, 26, 26, True, ('glpat-',)),
    ('gitlab-pat-routable', '\\bglpat-[0-9a-zA-Z_-]{27,300}\\.[0-9a-z]{2}[0-9a-z]{7}\\b', ('glpat-',), 4.0, 0, (), None, 43, 43, 316, True, ('glpat-',)),
    ('gitlab-ptt', 'glptt-[0-9a-f]{40}', ('glptt-',), 3.0, 0, (), None, 46, 46, 46, True, ('glptt-',)),
    ('gitlab-rrt', 'GR1348941[\\w-]{20}', ('gr1348941',), 3.0, 0, (), None, 29, 29, 29, True, ('gr1348941',)),
    ('gitlab-runner-authentication-token', 'glrt-[0-9a-zA-Z_\\-]{20}', ('glrt-',), 3.0, 0, (), None, 25, 25, 25, True, ('glrt-',)),
    ('gitlab-runner-authentication-token-routable', '\\bglrt-t\\d_[0-9a-zA-Z_\\-]{27,300}\\.[0-9a-z]{2}[0-9a-z]{7}\\b', ('glrt-',), 4.0, 0, (), None, 45, 45, 318, True, ('glrt-t',)),
    ('gitlab-scim-token', 'glsoat-[0-9a-zA-Z_\\-]{20}', ('glsoat-',), 3.0, 0, (), None, 27, 27, 27, True, ('glsoat-',)),
    ('gitlab-session-cookie', '_gitlab_session=[0-9a-z]{32}', ('_gitlab_session=',), 3.0, 0, (), None, 48, 48, 48, True, ('_gitlab_session=',)),
    ('gitter-access-token', '(?i)[\\w.-]{0,50}?(?:gitter)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9_-]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('gitter',), 0.0, 0, (), None, 40, 6, 130, True, ()),
    ('gocardless-api-token', '(?i)[\\w.-]{0,50}?(?:gocardless)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(live_(?i:[a-z0-9\\-_=]{40}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('live_', 'gocardless'), 0.0, 0, (), None, 45, 10, 139, True, ()),
    ('grafana-api-key', '(?i)\\b(eyJrIjoi[A-Za-z0-9]{70,400}={0,3})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('eyjrijoi',), 3.0, 0, (), None, 78, 78, 413, True, ('eyjrijoi',)),
    ('grafana-cloud-api-token', '(?i)\\b(glc_[A-Za-z0-9+/]{32,400}={0,3})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('glc_',), 3.0, 0, (), None, 36, 36, 409, True, ('glc_',)),
    ('grafana-service-account-token', '(?i)\\b(glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('glsa_',), 3.0, 0, (), None, 46, 46, 48, True, ('glsa_',)),
    ('harness-api-key', '(?:pat|sat)\\.[a-zA-Z0-9_-]{22}\\.[a-zA-Z0-9]{24}\\.[a-zA-Z0-9]{20}', ('pat.', 'sat.'), 0.0, 0, (), None, 72, 72, 72, True, ('pat.', 'sat.')),
    ('hashicorp-tf-api-token', '(?i)[a-z0-9]{14}\\.(?-i:atlasv1)\\.[a-z0-9\\-_=]{60,70}', ('atlasv1',), 3.5, 0, (), None, 83, 83, 93, True, ()),
    ('hashicorp-tf-password', '(?i)[\\w.-]{0,50}?(?:administrator_login_password|password)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}("[a-z0-9=_\\-]{8,20}")(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('administrator_login_password', 'password'), 2.0, 0, (), '(?i)\\.(?:tf|hcl)$', 8, 8, 134, True, ()),
    ('heroku-api-key', '(?i)[\\w.-]{0,50}?(?:heroku)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('heroku',), 0.0, 0, (), None, 36, 6, 126, True, ()),
    ('heroku-api-key-v2', '\\b((HRKU-AA[0-9a-zA-Z_-]{58}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('hrku-aa',), 4.0, 0, (), None, 65, 65, 67, True, ('hrku-aa',)),
    ('hubspot-api-key', '(?i)[\\w.-]{0,50}?(?:hubspot)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('hubspot',), 0.0, 0, (), None, 36, 7, 127, True, ()),
    ('huggingface-access-token', '\\b(hf_(?i:[a-z]{34}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('hf_',), 2.0, 0, (), None, 37, 37, 39, True, ('hf_',)),
    ('huggingface-organization-api-token', '\\b(api_org_(?i:[a-z]{34}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('api_org_',), 2.0, 0, (), None, 42, 42, 44, True, ('api_org_',)),
    ('infracost-api-token', '\\b(ico-[a-zA-Z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('ico-',), 3.0, 0, (), None, 36, 36, 38, True, ('ico-',)),
    ('intercom-api-key', '(?i)[\\w.-]{0,50}?(?:intercom)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9=_\\-]{60})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('intercom',), 0.0, 0, (), None, 60, 8, 152, True, ()),
    ('intra42-client-secret', '\\b(s-s4t2(?:ud|af)-(?i:[abcdef0123456789]{64}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('intra', 's-s4t2ud-', 's-s4t2af-'), 3.0, 0, (), None, 73, 73, 75, True, ('s-s4t2af-', 's-s4t2ud-')),
    ('jfrog-api-key', '(?i)[\\w.-]{0,50}?(?:jfrog|artifactory|bintray|xray)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{73})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('jfrog', 'artifactory', 'bintray', 'xray'), 0.0, 0, (), None, 73, 4, 168, True, ()),
    ('jfrog-identity-token', '(?i)[\\w.-]{0,50}?(?:jfrog|artifactory|bintray|xray)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('jfrog', 'artifactory', 'bintray', 'xray'), 0.0, 0, (), None, 64, 4, 159, True, ()),
    ('jwt', '\\b(ey[a-zA-Z0-9]{17,}\\.ey[a-zA-Z0-9\\/\\\\_-]{17,}\\.(?:[a-zA-Z0-9\\/\\\\_-]{10,}={0,2})?)(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('ey',), 3.0, 0, (), None, 22, 22, 0, True, ('ey',)),
    ('jwt-base64', '\\bZXlK(?:(?P<alg>aGJHY2lPaU)|(?P<apu>aGNIVWlPaU)|(?P<apv>aGNIWWlPaU)|(?P<aud>aGRXUWlPaU)|(?P<b64>aU5qUWlP)|(?P<crit>amNtbDBJanBi)|(?P<cty>amRIa2lPaU)|(?P<epk>bGNHc2lPbn)|(?P<enc>bGJtTWlPaU)|(?P<jku>cWEzVWlPaU)|(?P<jwk>cWQyc2lPb)|(?P<iss>cGMzTWlPaU)|(?P<iv>cGRpSTZJ)|(?P<kid>cmFXUWlP)|(?P<key_ops>clpYbGZiM0J6SWpwY)|(?P<kty>cmRIa2lPaUp)|(?P<nonce>dWIyNWpaU0k2)|(?P<p2c>d01tTWlP)|(?P<p2s>d01uTWlPaU)|(?P<ppt>d2NIUWlPaU)|(?P<sub>emRXSWlPaU)|(?P<svt>emRuUWlP)|(?P<tag>MFlXY2lPaU)|(?P<typ>MGVYQWlPaUp)|(?P<url>MWNtd2l)|(?P<use>MWMyVWlPaUp)|(?P<ver>MlpYSWlPaU)|(?P<version>MlpYSnphVzl1SWpv)|(?P<x>NElqb2)|(?P<x5c>NE5XTWlP)|(?P<x5t>NE5YUWlPaU)|(?P<x5ts256>NE5YUWpVekkxTmlJNkl)|(?P<x5u>NE5YVWlPaU)|(?P<zip>NmFYQWlPaU))[a-zA-Z0-9\\/\\\\_+\\-\\r\\n]{40,}={0,2}', ('zxlk',), 2.0, 0, (), None, 10, 10, 0, True, ()),
    ('kraken-access-token', '(?i)[\\w.-]{0,50}?(?:kraken)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9\\/=_\\+\\-]{80,90})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('kraken',), 0.0, 0, (), None, 80, 6, 180, True, ()),
    ('kubernetes-secret-yaml', '(?i)(?:\\bkind:[ \\t]*["\']?\\bsecret\\b["\']?(?s:.){0,200}?\\bdata:(?s:.){0,100}?\\s+([\\w.-]+:(?:[ \\t]*(?:\\||>[-+]?)\\s+)?[ \\t]*(?:["\']?[a-z0-9+/]{10,}={0,3}["\']?|\\{\\{[ \\t\\w"|$:=,.-]+}}|""|\'\'))|\\bdata:(?s:.){0,100}?\\s+([\\w.-]+:(?:[ \\t]*(?:\\||>[-+]?)\\s+)?[ \\t]*(?:["\']?[a-z0-9+/]{10,}={0,3}["\']?|\\{\\{[ \\t\\w"|$:=,.-]+}}|""|\'\'))(?s:.){0,200}?\\bkind:[ \\t]*["\']?\\bsecret\\b["\']?)', ('secret',), 0.0, 0, (('secret', 'OR', ('[\\w.-]+:(?:[ \\t]*(?:\\||>[-+]?)\\s+)?[ \\t]*(?:\\{\\{[ \\t\\w"|$:=,.-]+}}|""|\'\')',), (), ()), ('match', 'OR', ('(kind:(?s:.)+\\n---\\n(?s:.)+\\bdata:|data:(?s:.)+\\n---\\n(?s:.)+\\bkind:)',), (), ())), '(?i)\\.ya?ml$', 6, 4, 0, True, ('data:', 'kind:')),
    ('kucoin-access-token', '(?i)[\\w.-]{0,50}?(?:kucoin)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{24})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('kucoin',), 0.0, 0, (), None, 24, 6, 114, True, ()),
    ('kucoin-secret-key', '(?i)[\\w.-]{0,50}?(?:kucoin)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('kucoin',), 0.0, 0, (), None, 36, 6, 126, True, ()),
    ('launchdarkly-access-token', '(?i)[\\w.-]{0,50}?(?:launchdarkly)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9=_\\-]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('launchdarkly',), 0.0, 0, (), None, 40, 12, 136, True, ()),
    ('linear-api-key', 'lin_api_(?i:[a-z0-9]{40})', ('lin_api_',), 2.0, 0, (), None, 48, 48, 48, True, ('lin_api_',)),
    ('linear-client-secret', '(?i)[\\w.-]{0,50}?(?:linear)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('linear',), 2.0, 0, (), None, 32, 6, 122, True, ()),
    ('linkedin-client-id', '(?i)[\\w.-]{0,50}?(?:linked[_-]?in)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{14})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('linkedin', 'linked_in', 'linked-in'), 2.0, 0, (), None, 14, 8, 107, True, ()),
    ('linkedin-client-secret', '(?i)[\\w.-]{0,50}?(?:linked[_-]?in)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{16})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('linkedin', 'linked_in', 'linked-in'), 2.0, 0, (), None, 16, 8, 109, True, ()),
    ('lob-api-key', '(?i)[\\w.-]{0,50}?(?:lob)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}((live|test)_[a-f0-9]{35})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('test_', 'live_'), 0.0, 0, (), None, 40, 3, 127, True, ()),
    ('lob-pub-api-key', '(?i)[\\w.-]{0,50}?(?:lob)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}((test|live)_pub_[a-f0-9]{31})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('test_pub', 'live_pub', '_pub'), 0.0, 0, (), None, 40, 3, 127, True, ()),
    ('looker-client-id', '(?i)[\\w.-]{0,50}?(?:looker)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{20})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('looker',), 0.0, 0, (), None, 20, 6, 110, True, ()),
    ('looker-client-secret', '(?i)[\\w.-]{0,50}?(?:looker)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{24})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('looker',), 0.0, 0, (), None, 24, 6, 114, True, ()),
    ('mailchimp-api-key', '(?i)[\\w.-]{0,50}?(?:MailchimpSDK.initialize|mailchimp)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{32}-us\\d\\d)(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('mailchimp',), 0.0, 0, (), None, 37, 9, 144, True, ()),
    ('mailgun-private-api-token', '(?i)[\\w.-]{0,50}?(?:mailgun)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(key-[a-f0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('mailgun',), 0.0, 0, (), None, 36, 7, 127, True, ()),
    ('mailgun-pub-key', '(?i)[\\w.-]{0,50}?(?:mailgun)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(pubkey-[a-f0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('mailgun',), 0.0, 0, (), None, 39, 7, 130, True, ()),
    ('mailgun-signing-key', '(?i)[\\w.-]{0,50}?(?:mailgun)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-h0-9]{32}-[a-h0-9]{8}-[a-h0-9]{8})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('mailgun',), 0.0, 0, (), None, 50, 7, 141, True, ()),
    ('mapbox-api-token', '(?i)[\\w.-]{0,50}?(?:mapbox)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(pk\\.[a-z0-9]{60}\\.[a-z0-9]{22})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('mapbox',), 0.0, 0, (), None, 86, 6, 176, True, ()),
    ('mattermost-access-token', '(?i)[\\w.-]{0,50}?(?:mattermost)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{26})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('mattermost',), 0.0, 0, (), None, 26, 10, 120, True, ()),
    ('maxmind-license-key', '\\b([A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk)(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('_mmk',), 4.0, 0, (), None, 40, 40, 42, True, ()),
    ('messagebird-api-token', '(?i)[\\w.-]{0,50}?(?:message[_-]?bird)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{25})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('messagebird', 'message-bird', 'message_bird'), 0.0, 0, (), None, 25, 11, 121, True, ()),
    ('messagebird-client-id', '(?i)[\\w.-]{0,50}?(?:message[_-]?bird)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('messagebird', 'message-bird', 'message_bird'), 0.0, 0, (), None, 36, 11, 132, True, ()),
    ('microsoft-teams-webhook', 'https://[a-z0-9]+\\.webhook\\.office\\.com/webhookb2/[a-z0-9]{8}-([a-z0-9]{4}-){3}[a-z0-9]{12}@[a-z0-9]{8}-([a-z0-9]{4}-){3}[a-z0-9]{12}/IncomingWebhook/[a-z0-9]{32}/[a-z0-9]{8}-([a-z0-9]{4}-){3}[a-z0-9]{12}', ('webhook.office.com', 'webhookb2', 'incomingwebhook'), 0.0, 0, (), None, 122, 5, 0, True, ('https://',)),
    ('netlify-access-token', '(?i)[\\w.-]{0,50}?(?:netlify)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9=_\\-]{40,46})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('netlify',), 0.0, 0, (), None, 40, 7, 137, True, ()),
    ('new-relic-browser-api-token', '(?i)[\\w.-]{0,50}?(?:new-relic|newrelic|new_relic)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(NRJS-[a-f0-9]{19})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('nrjs-',), 0.0, 0, (), None, 24, 8, 117, True, ()),
    ('new-relic-insert-key', '(?i)[\\w.-]{0,50}?(?:new-relic|newrelic|new_relic)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(NRII-[a-z0-9-]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('nrii-',), 0.0, 0, (), None, 37, 8, 130, True, ()),
    ('new-relic-user-api-id', '(?i)[\\w.-]{0,50}?(?:new-relic|newrelic|new_relic)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('new-relic', 'newrelic', 'new_relic'), 0.0, 0, (), None, 64, 8, 157, True, ()),
    ('new-relic-user-api-key', '(?i)[\\w.-]{0,50}?(?:new-relic|newrelic|new_relic)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(NRAK-[a-z0-9]{27})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('nrak',), 0.0, 0, (), None, 32, 8, 125, True, ()),
    ('notion-api-token', '\\b(ntn_[0-9]{11}[A-Za-z0-9]{32}[A-Za-z0-9]{3})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('ntn_',), 4.0, 0, (), None, 50, 50, 52, True, ('ntn_',)),
    ('npm-access-token', '(?i)\\b(npm_[a-z0-9]{36})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('npm_',), 2.0, 0, (), None, 40, 40, 42, True, ('npm_',)),
    ('nuget-config-password', '(?i)<add key=\\"(?:(?:ClearText)?Password)\\"\\s*value=\\"(.{8,})\\"\\s*/>', ('<add key=',), 1.0, 0, (('secret', 'OR', ('33f!!lloppa', 'hal\\+9ooo_da!sY', '^\\%\\S.{0,1024}\\%$'), (), ()),), '(?i)nuget\\.config$', 8, 0, 0, True, ('<add key="cleartextpassword"', '<add key="password"')),
    ('nytimes-access-token', '(?i)[\\w.-]{0,50}?(?:nytimes|new-york-times,|newyorktimes)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9=_\\-]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('nytimes', 'new-york-times', 'newyorktimes'), 0.0, 0, (), None, 32, 7, 131, True, ()),
    ('octopus-deploy-api-key', '\\b(API-[A-Z0-9]{26})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('api-',), 3.0, 0, (), None, 30, 30, 32, True, ('api-',)),
    ('okta-access-token', '[\\w.-]{0,50}?(?i:[\\w.-]{0,50}?(?:(?-i:[Oo]kta|OKTA))(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3})(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(00[\\w=\\-]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('okta',), 4.0, 0, (), None, 42, 4, 180, True, ()),
    ('openai-api-key', '\\b(sk-(?:proj|svcacct|admin)-(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})T3BlbkFJ(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})\\b|sk-[a-zA-Z0-9]{20}T3BlbkFJ[a-zA-Z0-9]{20})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('t3blbkfj',), 3.0, 0, (), None, 51, 51, 169, True, ('sk-', 'sk-admin-', 'sk-proj-', 'sk-svcacct-')),
    ('openshift-user-token', '\\b(sha256~[\\w-]{43})(?:[^\\w-]|\\Z)', ('sha256~',), 3.5, 0, (), None, 50, 50, 51, True, ('sha256~',)),
    ('perplexity-api-key', '\\b(pplx-[a-zA-Z0-9]{48})(?:[\\x60\'"\\s;]|\\\\[nr]|$|\\b)', ('pplx-',), 4.0, 0, (), None, 53, 53, 55, True, ('pplx-',)),
    ('plaid-api-token', '(?i)[\\w.-]{0,50}?(?:plaid)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(access-(?:sandbox|development|production)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('plaid',), 0.0, 0, (), None, 51, 5, 144, True, ()),
    ('plaid-client-id', '(?i)[\\w.-]{0,50}?(?:plaid)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{24})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('plaid',), 3.5, 0, (), None, 24, 5, 113, True, ()),
    ('plaid-secret-key', '(?i)[\\w.-]{0,50}?(?:plaid)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{30})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('plaid',), 3.5, 0, (), None, 30, 5, 119, True, ()),
    ('planetscale-api-token', '\\b(pscale_tkn_(?i:[\\w=\\.-]{32,64}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('pscale_tkn_',), 3.0, 0, (), None, 43, 43, 77, True, ('pscale_tkn_',)),
    ('planetscale-oauth-token', '\\b(pscale_oauth_[\\w=\\.-]{32,64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('pscale_oauth_',), 3.0, 0, (), None, 45, 45, 79, True, ('pscale_oauth_',)),
    ('planetscale-password', '(?i)\\b(pscale_pw_(?i:[\\w=\\.-]{32,64}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('pscale_pw_',), 3.0, 0, (), None, 42, 42, 76, True, ('pscale_pw_',)),
    ('postman-api-token', '\\b(PMAK-(?i:[a-f0-9]{24}\\-[a-f0-9]{34}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('pmak-',), 3.0, 0, (), None, 64, 64, 66, True, ('pmak-',)),
    ('prefect-api-token', '\\b(pnu_[a-zA-Z0-9]{36})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('pnu_',), 2.0, 0, (), None, 40, 40, 42, True, ('pnu_',)),
    ('private-key', '(?i)-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\\s\\S-]{64,}?KEY(?: BLOCK)?-----', ('-----begin',), 0.0, 0, (), None, 10, 10, 0, True, ('-----begin',)),
    ('privateai-api-token', '[\\w.-]{0,50}?(?i:[\\w.-]{0,50}?(?:private[_-]?ai)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3})(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('privateai', 'private_ai', 'private-ai'), 3.0, 0, (), None, 32, 9, 176, True, ()),
    ('pulumi-api-token', '\\b(pul-[a-f0-9]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('pul-',), 2.0, 0, (), None, 44, 44, 46, True, ('pul-',)),
    ('pypi-upload-token', 'pypi-AgEIcHlwaS5vcmc[\\w-]{50,1000}', ('pypi-ageichlwas5vcmc',), 3.0, 0, (), None, 70, 70, 1020, True, ('pypi-ageichlwas5vcmc',)),
    ('rapidapi-access-token', '(?i)[\\w.-]{0,50}?(?:rapidapi)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9_-]{50})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('rapidapi',), 0.0, 0, (), None, 50, 8, 142, True, ()),
    ('readme-api-token', '\\b(rdme_[a-z0-9]{70})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('rdme_',), 2.0, 0, (), None, 75, 75, 77, True, ('rdme_',)),
    ('rubygems-api-token', '\\b(rubygems_[a-f0-9]{48})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('rubygems_',), 2.0, 0, (), None, 57, 57, 59, True, ('rubygems_',)),
    ('scalingo-api-token', '\\b(tk-us-[\\w-]{48})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('tk-us-',), 2.0, 0, (), None, 54, 54, 56, True, ('tk-us-',)),
    ('sendbird-access-id', '(?i)[\\w.-]{0,50}?(?:sendbird)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sendbird',), 0.0, 0, (), None, 36, 8, 128, True, ()),
    ('sendbird-access-token', '(?i)[\\w.-]{0,50}?(?:sendbird)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sendbird',), 0.0, 0, (), None, 40, 8, 132, True, ()),
    ('sendgrid-api-token', '\\b(SG\\.(?i:[a-z0-9=_\\-\\.]{66}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sg.',), 2.0, 0, (), None, 69, 69, 71, True, ('sg.',)),
    ('sendinblue-api-token', '\\b(xkeysib-[a-f0-9]{64}\\-(?i:[a-z0-9]{16}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('xkeysib-',), 2.0, 0, (), None, 89, 89, 91, True, ('xkeysib-',)),
    ('sentry-access-token', '(?i)[\\w.-]{0,50}?(?:sentry)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sentry',), 3.0, 0, (), None, 64, 6, 154, True, ()),
    ('sentry-org-token', '\\bsntrys_eyJpYXQiO[a-zA-Z0-9+/]{10,200}(?:LCJyZWdpb25fdXJs|InJlZ2lvbl91cmwi|cmVnaW9uX3VybCI6)[a-zA-Z0-9+/]{10,200}={0,2}_[a-zA-Z0-9+/]{43}(?:[^a-zA-Z0-9+/]|\\Z)', ('sntrys_eyjpyxqio',), 4.5, 0, (), None, 96, 96, 479, True, ('sntrys_eyjpyxqio',)),
    ('sentry-user-token', '\\b(sntryu_[a-f0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sntryu_',), 3.5, 0, (), None, 71, 71, 73, True, ('sntryu_',)),
    ('settlemint-application-access-token', '\\b(sm_aat_[a-zA-Z0-9]{16})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sm_aat',), 3.0, 0, (), None, 23, 23, 25, True, ('sm_aat_',)),
    ('settlemint-personal-access-token', '\\b(sm_pat_[a-zA-Z0-9]{16})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sm_pat',), 3.0, 0, (), None, 23, 23, 25, True, ('sm_pat_',)),
    ('settlemint-service-access-token', '\\b(sm_sat_[a-zA-Z0-9]{16})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sm_sat',), 3.0, 0, (), None, 23, 23, 25, True, ('sm_sat_',)),
    ('shippo-api-token', '\\b(shippo_(?:live|test)_[a-fA-F0-9]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('shippo_',), 2.0, 0, (), None, 52, 52, 54, True, ('shippo_live_', 'shippo_test_')),
    ('shopify-access-token', 'shpat_[a-fA-F0-9]{32}', ('shpat_',), 2.0, 0, (), None, 38, 38, 38, True, ('shpat_',)),
    ('shopify-custom-access-token', 'shpca_[a-fA-F0-9]{32}', ('shpca_',), 2.0, 0, (), None, 38, 38, 38, True, ('shpca_',)),
    ('shopify-private-app-access-token', 'shppa_[a-fA-F0-9]{32}', ('shppa_',), 2.0, 0, (), None, 38, 38, 38, True, ('shppa_',)),
    ('shopify-shared-secret', 'shpss_[a-fA-F0-9]{32}', ('shpss_',), 2.0, 0, (), None, 38, 38, 38, True, ('shpss_',)),
    ('sidekiq-secret', '(?i)[\\w.-]{0,50}?(?:BUNDLE_ENTERPRISE__CONTRIBSYS__COM|BUNDLE_GEMS__CONTRIBSYS__COM)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{8}:[a-f0-9]{8})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('bundle_enterprise__contribsys__com', 'bundle_gems__contribsys__com'), 0.0, 0, (), None, 28, 28, 135, True, ()),
    ('sidekiq-sensitive-url', '(?i)\\bhttps?://([a-f0-9]{8}:[a-f0-9]{8})@(?:gems.contribsys.com|enterprise.contribsys.com)(?:[\\/|\\#|\\?|:]|$)', ('gems.contribsys.com', 'enterprise.contribsys.com'), 0.0, 0, (), None, 10, 4, 52, False, ('http://', 'https://')),
    ('slack-app-token', '(?i)xapp-\\d-[A-Z0-9]+-\\d+-[a-z0-9]+', ('xapp',), 2.0, 0, (), None, 12, 12, 0, True, ('xapp-',)),
    ('slack-bot-token', 'xoxb-[0-9]{10,13}-[0-9]{10,13}[a-zA-Z0-9-]*', ('xoxb',), 3.0, 0, (), None, 26, 26, 0, True, ('xoxb-',)),
    ('slack-config-access-token', '(?i)xoxe.xox[bp]-\\d-[A-Z0-9]{163,166}', ('xoxe.xoxb-', 'xoxe.xoxp-'), 2.0, 0, (), None, 170, 4, 178, False, ('xoxe',)),
    ('slack-config-refresh-token', '(?i)xoxe-\\d-[A-Z0-9]{146}', ('xoxe-',), 2.0, 0, (), None, 153, 153, 153, True, ('xoxe-',)),
    ('slack-legacy-bot-token', 'xoxb-[0-9]{8,14}-[a-zA-Z0-9]{18,26}', ('xoxb',), 2.0, 0, (), None, 32, 32, 46, True, ('xoxb-',)),
    ('slack-legacy-token', 'xox[os]-\\d+-\\d+-\\d+-[a-fA-F\\d]+', ('xoxo', 'xoxs'), 2.0, 0, (), None, 12, 12, 0, True, ('xoxo-', 'xoxs-')),
    ('slack-legacy-workspace-token', 'xox[ar]-(?:\\d-)?[0-9a-zA-Z]{8,48}', ('xoxa', 'xoxr'), 2.0, 0, (), None, 13, 13, 55, True, ('xoxa-', 'xoxr-')),
    ('slack-user-token', 'xox[pe](?:-[0-9]{10,13}){3}-[a-zA-Z0-9-]{28,34}', ('xoxp-', 'xoxe-'), 2.0, 0, (), None, 66, 66, 81, True, ('xoxe-', 'xoxp-')),
    ('slack-webhook-url', '(?:https?://)?hooks.slack.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56}', ('hooks.slack.com',), 0.0, 0, (), None, 56, 0, 90, False, ('hooks', 'http://hooks', 'https://hooks')),
    ('snyk-api-token', '(?i)[\\w.-]{0,50}?(?:snyk[_.-]?(?:(?:api|oauth)[_.-]?)?(?:key|token))(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('snyk',), 0.0, 0, (), None, 36, 7, 136, True, ()),
    ('sonar-api-token', '(?i)[\\w.-]{0,50}?(?:sonar[_.-]?(login|token))(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}((?:squ_|sqp_|sqa_)?[a-z0-9=_\\-]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sonar',), 0.0, 2, (), None, 40, 10, 139, True, ()),
    ('sourcegraph-access-token', '(?i)\\b(\\b(sgp_(?:[a-fA-F0-9]{16}|local)_[a-fA-F0-9]{40}|sgp_[a-fA-F0-9]{40}|[a-fA-F0-9]{40})\\b)(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sgp_', 'sourcegraph'), 3.0, 0, (), None, 40, 40, 63, False, ()),
    ('square-access-token', '\\b((?:EAAA|sq0atp-)[\\w-]{22,60})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sq0atp-', 'eaaa'), 2.0, 0, (), None, 26, 26, 69, True, ('eaaa', 'sq0atp-')),
    ('squarespace-access-token', '(?i)[\\w.-]{0,50}?(?:squarespace)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('squarespace',), 0.0, 0, (), None, 36, 11, 131, True, ()),
    ('stripe-access-token', '\\b((?:sk|rk)_(?:test|live|prod)_[a-zA-Z0-9]{10,99})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sk_test', 'sk_live', 'sk_prod', 'rk_test', 'rk_live', 'rk_prod'), 2.0, 0, (), None, 18, 18, 109, True, ('rk_live_', 'rk_prod_', 'rk_test_', 'sk_live_', 'sk_prod_', 'sk_test_')),
    ('sumologic-access-id', '[\\w.-]{0,50}?(?i:[\\w.-]{0,50}?(?:(?-i:[Ss]umo|SUMO))(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3})(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(su[a-zA-Z0-9]{12})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sumo',), 3.0, 0, (), None, 14, 4, 152, True, ()),
    ('sumologic-access-token', '(?i)[\\w.-]{0,50}?(?:(?-i:[Ss]umo|SUMO))(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sumo',), 3.0, 0, (), None, 64, 4, 152, True, ()),
    ('telegram-bot-api-token', '(?i)[\\w.-]{0,50}?(?:telegr)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9]{5,16}:(?-i:A)[a-z0-9_\\-]{34})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('telegr',), 0.0, 0, (), None, 35, 6, 142, True, ()),
    ('travisci-access-token', '(?i)[\\w.-]{0,50}?(?:travis)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{22})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('travis',), 0.0, 0, (), None, 22, 6, 112, True, ()),
    ('twilio-api-key', 'SK[0-9a-fA-F]{32}', ('sk',), 3.0, 0, (), None, 34, 34, 34, True, ('sk',)),
    ('twitch-api-token', '(?i)[\\w.-]{0,50}?(?:twitch)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{30})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('twitch',), 0.0, 0, (), None, 30, 6, 120, True, ()),
    ('twitter-access-secret', '(?i)[\\w.-]{0,50}?(?:twitter)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{45})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('twitter',), 0.0, 0, (), None, 45, 7, 136, True, ()),
    ('twitter-access-token', '(?i)[\\w.-]{0,50}?(?:twitter)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9]{15,25}-[a-zA-Z0-9]{20,40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('twitter',), 0.0, 0, (), None, 36, 7, 157, True, ()),
    ('twitter-api-key', '(?i)[\\w.-]{0,50}?(?:twitter)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{25})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('twitter',), 0.0, 0, (), None, 25, 7, 116, True, ()),
    ('twitter-api-secret', '(?i)[\\w.-]{0,50}?(?:twitter)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{50})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('twitter',), 0.0, 0, (), None, 50, 7, 141, True, ()),
    ('twitter-bearer-token', '(?i)[\\w.-]{0,50}?(?:twitter)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(A{22}[a-zA-Z0-9%]{80,100})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('twitter',), 0.0, 0, (), None, 22, 7, 213, True, ()),
    ('typeform-api-token', '(?i)[\\w.-]{0,50}?(?:typeform)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(tfp_[a-z0-9\\-_\\.=]{59})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('tfp_',), 0.0, 0, (), None, 63, 8, 155, True, ()),
    ('vault-batch-token', '\\b(hvb\\.[\\w-]{138,300})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('hvb.',), 4.0, 0, (), None, 142, 142, 306, True, ('hvb.',)),
    ('vault-service-token', '\\b((?:hvs\\.[\\w-]{90,120}|s\\.(?i:[a-z0-9]{24})))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('hvs.', 's.'), 3.5, 0, (('secret', 'OR', ('s\\.[A-Za-z]{24}',), (), ()),), None, 26, 26, 126, True, ('hvs.', 's.')),
    ('yandex-access-token', '(?i)[\\w.-]{0,50}?(?:yandex)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(t1\\.[A-Z0-9a-z_-]+[=]{0,2}\\.[A-Z0-9a-z_-]{86}[=]{0,2})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('yandex',), 0.0, 0, (), None, 91, 6, 0, True, ()),
    ('yandex-api-key', '(?i)[\\w.-]{0,50}?(?:yandex)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(AQVN[A-Za-z0-9_\\-]{35,38})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('yandex',), 0.0, 0, (), None, 39, 6, 132, True, ()),
    ('yandex-aws-access-token', '(?i)[\\w.-]{0,50}?(?:yandex)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(YC[a-zA-Z0-9_\\-]{38})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('yandex',), 0.0, 0, (), None, 40, 6, 130, True, ()),
    ('zendesk-secret-key', '(?i)[\\w.-]{0,50}?(?:zendesk)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('zendesk',), 0.0, 0, (), None, 40, 7, 131, True, ()),
)

GLOBAL_ALLOW_REGEXES = ('(?i)^true|false|null$', '^(?i:a+|b+|c+|d+|e+|f+|g+|h+|i+|j+|k+|l+|m+|n+|o+|p+|q+|r+|s+|t+|u+|v+|w+|x+|y+|z+|\\*+|\\.+)$', '^\\$(?:\\d+|{\\d+})$', '^\\$(?:[A-Z_]+|[a-z_]+)$', '^\\${(?:[A-Z_]+|[a-z_]+)}$', '^\\{\\{[ \\t]*[\\w ().|]+[ \\t]*}}$', '^\\$\\{\\{[ \\t]*(?:(?:env|github|secrets|vars)(?:\\.[A-Za-z]\\w+)+[\\w "\'&./=|]*)[ \\t]*}}$', '^%(?:[A-Z_]+|[a-z_]+)%$', '^%[+\\-# 0]?[bcdeEfFgGoOpqstTUvxX]$', '^\\{\\d{0,2}}$', '^@(?:[A-Z_]+|[a-z_]+)@$', '^/Users/(?i:[a-z0-9]+/[\\w .-/]+$)', '^/(?:bin|etc|home|opt|tmp|usr|var)/[\\w ./-]+$')

GLOBAL_STOPWORDS = ('014df517-39d1-4453-b7b3-9930c563627c', 'abcdefghijklmnopqrstuvwxyz')

#: rule id -> the longest run of letters, digits and _-.+/=~ every match holds
RUN_LENGTH = {r[0]: r[7] for r in RULES}
#: rule id -> the run characters every match starts with, one after the other (rules with none left out)
LEAD_RUN = {r[0]: r[8] for r in RULES if r[8]}
#: rule id -> the most characters a match can span (0: unbounded or over 4,096)
MAX_WIDTH = {r[0]: r[9] for r in RULES}
#: rules every match of which holds one of their keywords (from each parsed regex)
KEYWORD_IN_MATCH = tuple(r[0] for r in RULES if r[10])
#: rule id -> the fixed texts (lowercased) one of which every match starts with
STARTS = {r[0]: r[11] for r in RULES if r[11]}
#: rules with a path condition: applied only to text whose file path matches
PATH_ONLY = tuple(r[0] for r in RULES if r[6] is not None)

#: rules that could not be translated, with the reason
UNTRANSLATED = (('pkcs12-file', 'no regex: only a path condition ((?i)(?:^|\\/)[^\\/]+\\.p(?:12|fx)$)'),)

#: rules left out on purpose, with the reason
LEFT_OUT = (('generic-api-key', 'our keyword rule (generic-secret) covers it, and it would redact ordinary code in tool output'),)
