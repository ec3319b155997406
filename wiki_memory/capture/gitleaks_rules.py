"""gitleaks' default rules, translated to Python ``re``: GENERATED, do not edit.

Regenerate with ``python scripts/gen_gitleaks_rules.py`` (see docs/sanitizer.md).
Source: gitleaks.toml, gitleaks config, minVersion v8.25.0.

Each rule: (id, regex, keywords, entropy, secret_group, allowlists, path).
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
    ('1password-secret-key', '\\bA3-[A-Z0-9]{6}-(?:(?:[A-Z0-9]{11})|(?:[A-Z0-9]{6}-[A-Z0-9]{5}))-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}\\b', ('a3-',), 3.8, 0, (), None),
    ('1password-service-account-token', 'ops_eyJ[a-zA-Z0-9+/]{250,}={0,3}', ('ops_',), 4.0, 0, (), None),
    ('adafruit-api-key', '(?i)[\\w.-]{0,50}?(?:adafruit)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9_-]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('adafruit',), 0.0, 0, (), None),
    ('adobe-client-id', '(?i)[\\w.-]{0,50}?(?:adobe)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('adobe',), 2.0, 0, (), None),
    ('adobe-client-secret', '\\b(p8e-(?i:[a-z0-9]{32}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('p8e-',), 2.0, 0, (), None),
    ('age-secret-key', 'AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}', ('age-secret-key-1',), 0.0, 0, (), None),
    ('airtable-api-key', '(?i)[\\w.-]{0,50}?(?:airtable)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{17})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('airtable',), 0.0, 0, (), None),
    ('airtable-personnal-access-token', '\\b(pat[A-Za-z0-9]{14}\\.[a-f0-9]{64})\\b', ('airtable',), 0.0, 0, (), None),
    ('algolia-api-key', '(?i)[\\w.-]{0,50}?(?:algolia)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('algolia',), 0.0, 0, (), None),
    ('alibaba-access-key-id', '\\b(LTAI(?i:[a-z0-9]{20}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('ltai',), 2.0, 0, (), None),
    ('alibaba-secret-key', '(?i)[\\w.-]{0,50}?(?:alibaba)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{30})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('alibaba',), 2.0, 0, (), None),
    ('anthropic-admin-api-key', '\\b(sk-ant-admin01-[a-zA-Z0-9_\\-]{93}AA)(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sk-ant-admin01',), 0.0, 0, (), None),
    ('anthropic-api-key', '\\b(sk-ant-api03-[a-zA-Z0-9_\\-]{93}AA)(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sk-ant-api03',), 0.0, 0, (), None),
    ('artifactory-api-key', '\\bAKCp[A-Za-z0-9]{69}\\b', ('akcp',), 4.5, 0, (), None),
    ('artifactory-reference-token', '\\bcmVmd[A-Za-z0-9]{59}\\b', ('cmvmd',), 4.5, 0, (), None),
    ('asana-client-id', '(?i)[\\w.-]{0,50}?(?:asana)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9]{16})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('asana',), 0.0, 0, (), None),
    ('asana-client-secret', '(?i)[\\w.-]{0,50}?(?:asana)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('asana',), 0.0, 0, (), None),
    ('atlassian-api-token', '(?i)[\\w.-]{0,50}?(?:(?-i:ATLASSIAN|[Aa]tlassian)|(?-i:CONFLUENCE|[Cc]onfluence)|(?-i:JIRA|[Jj]ira))(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{20}[a-f0-9]{4})(?:[\\x60\'"\\s;]|\\\\[nr]|$)|\\b(ATATT3[A-Za-z0-9_\\-=]{186})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('atlassian', 'confluence', 'jira', 'atatt3'), 3.5, 0, (), None),
    ('authress-service-client-access-key', '\\b((?:sc|ext|scauth|authress)_(?i:[a-z0-9]{5,30}\\.[a-z0-9]{4,6}\\.(?-i:acc)[_-][a-z0-9-]{10,32}\\.[a-z0-9+/_=-]{30,120}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sc_', 'ext_', 'scauth_', 'authress_'), 2.0, 0, (), None),
    ('aws-access-token', '\\b((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\\b', ('a3t', 'akia', 'asia', 'abia', 'acca'), 3.0, 0, (('secret', 'OR', ('.{1,1024}EXAMPLE$',), (), ()),), None),
    ('aws-amazon-bedrock-api-key-long-lived', '\\b(ABSK[A-Za-z0-9+/]{109,269}={0,2})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('absk',), 3.0, 0, (), None),
    ('aws-amazon-bedrock-api-key-short-lived', 'bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t', ('bedrock-api-key-',), 3.0, 0, (), None),
    ('azure-ad-client-secret', '(?:^|[\\\\\'"\\x60\\s>=:(,)])([a-zA-Z0-9_~.]{3}\\dQ~[a-zA-Z0-9_~.-]{31,34})(?:$|[\\\\\'"\\x60\\s<),])', ('q~',), 3.0, 0, (), None),
    ('beamer-api-token', '(?i)[\\w.-]{0,50}?(?:beamer)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(b_[a-z0-9=_\\-]{44})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('beamer',), 0.0, 0, (), None),
    ('bitbucket-client-id', '(?i)[\\w.-]{0,50}?(?:bitbucket)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('bitbucket',), 0.0, 0, (), None),
    ('bitbucket-client-secret', '(?i)[\\w.-]{0,50}?(?:bitbucket)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9=_\\-]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('bitbucket',), 0.0, 0, (), None),
    ('bittrex-access-key', '(?i)[\\w.-]{0,50}?(?:bittrex)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('bittrex',), 0.0, 0, (), None),
    ('bittrex-secret-key', '(?i)[\\w.-]{0,50}?(?:bittrex)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('bittrex',), 0.0, 0, (), None),
    ('cisco-meraki-api-key', '[\\w.-]{0,50}?(?i:[\\w.-]{0,50}?(?:(?-i:[Mm]eraki|MERAKI))(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3})(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9a-f]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('meraki',), 3.0, 0, (), None),
    ('clickhouse-cloud-api-secret-key', '\\b(4b1d[A-Za-z0-9]{38})\\b', ('4b1d',), 3.0, 0, (), None),
    ('clojars-api-token', '(?i)CLOJARS_[a-z0-9]{60}', ('clojars_',), 2.0, 0, (), None),
    ('cloudflare-api-key', '(?i)[\\w.-]{0,50}?(?:cloudflare)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9_-]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('cloudflare',), 2.0, 0, (), None),
    ('cloudflare-global-api-key', '(?i)[\\w.-]{0,50}?(?:cloudflare)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{37})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('cloudflare',), 2.0, 0, (), None),
    ('cloudflare-origin-ca-key', '\\b(v1\\.0-[a-f0-9]{24}-[a-f0-9]{146})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('cloudflare', 'v1.0-'), 2.0, 0, (), None),
    ('codecov-access-token', '(?i)[\\w.-]{0,50}?(?:codecov)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('codecov',), 0.0, 0, (), None),
    ('cohere-api-token', '[\\w.-]{0,50}?(?i:[\\w.-]{0,50}?(?:cohere|CO_API_KEY)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3})(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-zA-Z0-9]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('cohere', 'co_api_key'), 4.0, 0, (), None),
    ('coinbase-access-token', '(?i)[\\w.-]{0,50}?(?:coinbase)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9_-]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('coinbase',), 0.0, 0, (), None),
    ('confluent-access-token', '(?i)[\\w.-]{0,50}?(?:confluent)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{16})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('confluent',), 0.0, 0, (), None),
    ('confluent-secret-key', '(?i)[\\w.-]{0,50}?(?:confluent)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('confluent',), 0.0, 0, (), None),
    ('contentful-delivery-api-token', '(?i)[\\w.-]{0,50}?(?:contentful)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9=_\\-]{43})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('contentful',), 0.0, 0, (), None),
    ('curl-auth-header', '\\bcurl\\b(?:.{0,1024}?|.{0,1024}?(?:[\\r\\n]{1,2}.{0,1024}?){1,5})[ \\t\\n\\r](?:-H|--header)(?:=|[ \\t]{0,5})(?:"(?i:(?:Authorization:[ \\t]{0,5}(?:Basic[ \\t]([a-z0-9+/]{8,}={0,3})|(?:Bearer|(?:Api-)?Token)[ \\t]([\\w=~@.+/-]{8,})|([\\w=~@.+/-]{8,}))|(?:(?:X-(?:[a-z]+-)?)?(?:Api-?)?(?:Key|Token)):[ \\t]{0,5}([\\w=~@.+/-]{8,}))")|(?i:\'(?i:(?:Authorization:[ \\t]{0,5}(?:Basic[ \\t]([a-z0-9+/]{8,}={0,3})|(?:Bearer|(?:Api-)?Token)[ \\t]([\\w=~@.+/-]{8,})|([\\w=~@.+/-]{8,}))|(?:(?:X-(?:[a-z]+-)?)?(?:Api-?)?(?:Key|Token)):[ \\t]{0,5}([\\w=~@.+/-]{8,}))\')))(?:\\B|\\s|\\Z)', ('curl',), 2.75, 0, (), None),
    ('curl-auth-user', '\\bcurl\\b(?:.{0,1024}|.{0,1024}(?:[\\r\\n]{1,2}.{0,1024}){1,5})[ \\t\\n\\r](?:-u|--user)(?:=|[ \\t]{0,5})("(:[^"]{3,}|[^:"]{3,}:|[^:"]{3,}:[^"]{3,})"|\'([^:\']{3,}:[^\']{3,})\'|((?:"[^"]{3,}"|\'[^\']{3,}\'|[\\w$@.-]+):(?:"[^"]{3,}"|\'[^\']{3,}\'|[\\w${}@.-]+)))(?:\\s|\\Z)', ('curl',), 2.0, 0, (('secret', 'OR', ('[^:]+:(?:change(?:it|me)|pass(?:word)?|pwd|test|token|\\*+|x+)', '[\'"]?<[^>]+>[\'"]?:[\'"]?<[^>]+>|<[^:]+:[^>]+>[\'"]?', '[^:]+:\\[[^\\]]+]', '[\'"]?[^:]+[\'"]?:[\'"]?\\$(?:\\d|\\w+|\\{(?:\\d|\\w+)})[\'"]?', '\\$\\([^)]+\\):\\$\\([^)]+\\)', '[\'"]?\\$?{{[^}]+}}[\'"]?:[\'"]?\\$?{{[^}]+}}[\'"]?'), (), ()),), None),
    ('databricks-api-token', '\\b(dapi[a-f0-9]{32}(?:-\\d)?)(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('dapi',), 3.0, 0, (), None),
    ('datadog-access-token', '(?i)[\\w.-]{0,50}?(?:datadog)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('datadog',), 0.0, 0, (), None),
    ('defined-networking-api-token', '(?i)[\\w.-]{0,50}?(?:dnkey)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(dnkey-[a-z0-9=_\\-]{26}-[a-z0-9=_\\-]{52})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('dnkey',), 0.0, 0, (), None),
    ('digitalocean-access-token', '\\b(doo_v1_[a-f0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('doo_v1_',), 3.0, 0, (), None),
    ('digitalocean-pat', '\\b(dop_v1_[a-f0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('dop_v1_',), 3.0, 0, (), None),
    ('digitalocean-refresh-token', '(?i)\\b(dor_v1_[a-f0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('dor_v1_',), 0.0, 0, (), None),
    ('discord-api-token', '(?i)[\\w.-]{0,50}?(?:discord)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('discord',), 0.0, 0, (), None),
    ('discord-client-id', '(?i)[\\w.-]{0,50}?(?:discord)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9]{18})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('discord',), 2.0, 0, (), None),
    ('discord-client-secret', '(?i)[\\w.-]{0,50}?(?:discord)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9=_\\-]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('discord',), 2.0, 0, (), None),
    ('doppler-api-token', 'dp\\.pt\\.(?i:[a-z0-9]{43})', ('dp.pt.',), 2.0, 0, (), None),
    ('droneci-access-token', '(?i)[\\w.-]{0,50}?(?:droneci)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('droneci',), 0.0, 0, (), None),
    ('dropbox-api-token', '(?i)[\\w.-]{0,50}?(?:dropbox)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{15})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('dropbox',), 0.0, 0, (), None),
    ('dropbox-long-lived-api-token', '(?i)[\\w.-]{0,50}?(?:dropbox)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{11}(AAAAAAAAAA)[a-z0-9\\-_=]{43})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('dropbox',), 0.0, 0, (), None),
    ('dropbox-short-lived-api-token', '(?i)[\\w.-]{0,50}?(?:dropbox)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(sl\\.[a-z0-9\\-=_]{135})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('dropbox',), 0.0, 0, (), None),
    ('duffel-api-token', 'duffel_(?:test|live)_(?i:[a-z0-9_\\-=]{43})', ('duffel_',), 2.0, 0, (), None),
    ('dynatrace-api-token', 'dt0c01\\.(?i:[a-z0-9]{24}\\.[a-z0-9]{64})', ('dt0c01.',), 4.0, 0, (), None),
    ('easypost-api-token', '\\bEZAK(?i:[a-z0-9]{54}\\b)', ('ezak',), 2.0, 0, (), None),
    ('easypost-test-api-token', '\\bEZTK(?i:[a-z0-9]{54}\\b)', ('eztk',), 2.0, 0, (), None),
    ('etsy-access-token', '(?i)[\\w.-]{0,50}?(?:(?-i:ETSY|[Ee]tsy))(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{24})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('etsy',), 3.0, 0, (), None),
    ('facebook-access-token', '(?i)\\b(\\d{15,16}(\\||%)[0-9a-z\\-_]{27,40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('facebook',), 3.0, 0, (), None),
    ('facebook-page-access-token', '\\b(EAA[MC](?i:[a-z0-9]{100,}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('eaam', 'eaac'), 4.0, 0, (), None),
    ('facebook-secret', '(?i)[\\w.-]{0,50}?(?:facebook)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('facebook',), 3.0, 0, (), None),
    ('fastly-api-token', '(?i)[\\w.-]{0,50}?(?:fastly)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9=_\\-]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('fastly',), 0.0, 0, (), None),
    ('finicity-api-token', '(?i)[\\w.-]{0,50}?(?:finicity)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('finicity',), 0.0, 0, (), None),
    ('finicity-client-secret', '(?i)[\\w.-]{0,50}?(?:finicity)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{20})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('finicity',), 0.0, 0, (), None),
    ('finnhub-access-token', '(?i)[\\w.-]{0,50}?(?:finnhub)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{20})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('finnhub',), 0.0, 0, (), None),
    ('flickr-access-token', '(?i)[\\w.-]{0,50}?(?:flickr)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('flickr',), 0.0, 0, (), None),
    ('flutterwave-encryption-key', 'FLWSECK_TEST-(?i:[a-h0-9]{12})', ('flwseck_test',), 2.0, 0, (), None),
    ('flutterwave-public-key', 'FLWPUBK_TEST-(?i:[a-h0-9]{32}-X)', ('flwpubk_test',), 2.0, 0, (), None),
    ('flutterwave-secret-key', 'FLWSECK_TEST-(?i:[a-h0-9]{32}-X)', ('flwseck_test',), 2.0, 0, (), None),
    ('flyio-access-token', '\\b((?:fo1_[\\w-]{43}|fm1[ar]_[a-zA-Z0-9+\\/]{100,}={0,3}|fm2_[a-zA-Z0-9+\\/]{100,}={0,3}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('fo1_', 'fm1', 'fm2_'), 4.0, 0, (), None),
    ('frameio-api-token', 'fio-u-(?i:[a-z0-9\\-_=]{64})', ('fio-u-',), 0.0, 0, (), None),
    ('freemius-secret-key', '(?i)["\']secret_key["\']\\s*=>\\s*["\'](sk_[\\S]{29})["\']', ('secret_key',), 0.0, 0, (), '(?i)\\.php$'),
    ('freshbooks-access-token', '(?i)[\\w.-]{0,50}?(?:freshbooks)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('freshbooks',), 0.0, 0, (), None),
    ('gcp-api-key', '\\b(AIza[\\w-]{35})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('aiza',), 4.0, 0, (('secret', 'OR', ('AIzaSyabcdefghijklmnopqrstuvwxyz1234567', 'AIzaSyAnLA7NfeLquW1tJFpx_eQCxoX-oo6YyIs', 'AIzaSyCkEhVjf3pduRDt6d1yKOMitrUEke8agEM', 'AIzaSyDMAScliyLx7F0NPDEJi1QmyCgHIAODrlU', 'AIzaSyD3asb-2pEZVqMkmL6M9N6nHZRR_znhrh0', 'AIzayDNSXIbFmlXbIE6mCzDLQAqITYefhixbX4A', 'AIzaSyAdOS2zB6NCsk1pCdZ4-P6GBdi_UUPwX7c', 'AIzaSyASWm6HmTMdYWpgMnjRBjxcQ9CKctWmLd4', 'AIzaSyANUvH9H9BsUccjsu2pCmEkOPjjaXeDQgY', 'AIzaSyA5_iVawFQ8ABuTZNUdcwERLJv_a_p4wtM', 'AIzaSyA4UrcGxgwQFTfaI3no3t7Lt1sjmdnP5sQ', 'AIzaSyDSb51JiIcB6OJpwwMicseKRhhrOq1cS7g', 'AIzaSyBF2RrAIm4a0mO64EShQfqfd2AFnzAvvuU', 'AIzaSyBcE-OOIbhjyR83gm4r2MFCu4MJmprNXsw', 'AIzaSyB8qGxt4ec15vitgn44duC5ucxaOi4FmqE', 'AIzaSyA8vmApnrHNFE0bApF4hoZ11srVL_n0nvY'), (), ()),), None),
    ('github-app-token', '(?:ghu|ghs)_[0-9a-zA-Z]{36}', ('ghu_', 'ghs_'), 3.0, 0, (('secret', 'OR', (), (), ('(?:^|/)@octokit/auth-token/README\\.md$',)),), None),
    ('github-fine-grained-pat', 'github_pat_\\w{82}', ('github_pat_',), 3.0, 0, (), None),
    ('github-oauth', 'gho_[0-9a-zA-Z]{36}', ('gho_',), 3.0, 0, (), None),
    ('github-pat', 'ghp_[0-9a-zA-Z]{36}', ('ghp_',), 3.0, 0, (('secret', 'OR', (), (), ('(?:^|/)@octokit/auth-token/README\\.md$',)),), None),
    ('github-refresh-token', 'ghr_[0-9a-zA-Z]{36}', ('ghr_',), 3.0, 0, (), None),
    ('gitlab-cicd-job-token', 'glcbt-[0-9a-zA-Z]{1,5}_[0-9a-zA-Z_-]{20}', ('glcbt-',), 3.0, 0, (), None),
    ('gitlab-deploy-token', 'gldt-[0-9a-zA-Z_\\-]{20}', ('gldt-',), 3.0, 0, (), None),
    ('gitlab-feature-flag-client-token', 'glffct-[0-9a-zA-Z_\\-]{20}', ('glffct-',), 3.0, 0, (), None),
    ('gitlab-feed-token', 'glft-[0-9a-zA-Z_\\-]{20}', ('glft-',), 3.0, 0, (), None),
    ('gitlab-incoming-mail-token', 'glimt-[0-9a-zA-Z_\\-]{25}', ('glimt-',), 3.0, 0, (), None),
    ('gitlab-kubernetes-agent-token', 'glagent-[0-9a-zA-Z_\\-]{50}', ('glagent-',), 3.0, 0, (), None),
    ('gitlab-oauth-app-secret', 'gloas-[0-9a-zA-Z_\\-]{64}', ('gloas-',), 3.0, 0, (), None),
    ('gitlab-pat', 'glpat-[\\w-]{20}', ('glpat-',), 3.0, 0, (), None),
    ('gitlab-pat-routable', '\\bglpat-[0-9a-zA-Z_-]{27,300}\\.[0-9a-z]{2}[0-9a-z]{7}\\b', ('glpat-',), 4.0, 0, (), None),
    ('gitlab-ptt', 'glptt-[0-9a-f]{40}', ('glptt-',), 3.0, 0, (), None),
    ('gitlab-rrt', 'GR1348941[\\w-]{20}', ('gr1348941',), 3.0, 0, (), None),
    ('gitlab-runner-authentication-token', 'glrt-[0-9a-zA-Z_\\-]{20}', ('glrt-',), 3.0, 0, (), None),
    ('gitlab-runner-authentication-token-routable', '\\bglrt-t\\d_[0-9a-zA-Z_\\-]{27,300}\\.[0-9a-z]{2}[0-9a-z]{7}\\b', ('glrt-',), 4.0, 0, (), None),
    ('gitlab-scim-token', 'glsoat-[0-9a-zA-Z_\\-]{20}', ('glsoat-',), 3.0, 0, (), None),
    ('gitlab-session-cookie', '_gitlab_session=[0-9a-z]{32}', ('_gitlab_session=',), 3.0, 0, (), None),
    ('gitter-access-token', '(?i)[\\w.-]{0,50}?(?:gitter)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9_-]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('gitter',), 0.0, 0, (), None),
    ('gocardless-api-token', '(?i)[\\w.-]{0,50}?(?:gocardless)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(live_(?i:[a-z0-9\\-_=]{40}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('live_', 'gocardless'), 0.0, 0, (), None),
    ('grafana-api-key', '(?i)\\b(eyJrIjoi[A-Za-z0-9]{70,400}={0,3})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('eyjrijoi',), 3.0, 0, (), None),
    ('grafana-cloud-api-token', '(?i)\\b(glc_[A-Za-z0-9+/]{32,400}={0,3})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('glc_',), 3.0, 0, (), None),
    ('grafana-service-account-token', '(?i)\\b(glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('glsa_',), 3.0, 0, (), None),
    ('harness-api-key', '(?:pat|sat)\\.[a-zA-Z0-9_-]{22}\\.[a-zA-Z0-9]{24}\\.[a-zA-Z0-9]{20}', ('pat.', 'sat.'), 0.0, 0, (), None),
    ('hashicorp-tf-api-token', '(?i)[a-z0-9]{14}\\.(?-i:atlasv1)\\.[a-z0-9\\-_=]{60,70}', ('atlasv1',), 3.5, 0, (), None),
    ('hashicorp-tf-password', '(?i)[\\w.-]{0,50}?(?:administrator_login_password|password)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}("[a-z0-9=_\\-]{8,20}")(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('administrator_login_password', 'password'), 2.0, 0, (), '(?i)\\.(?:tf|hcl)$'),
    ('heroku-api-key', '(?i)[\\w.-]{0,50}?(?:heroku)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('heroku',), 0.0, 0, (), None),
    ('heroku-api-key-v2', '\\b((HRKU-AA[0-9a-zA-Z_-]{58}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('hrku-aa',), 4.0, 0, (), None),
    ('hubspot-api-key', '(?i)[\\w.-]{0,50}?(?:hubspot)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('hubspot',), 0.0, 0, (), None),
    ('huggingface-access-token', '\\b(hf_(?i:[a-z]{34}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('hf_',), 2.0, 0, (), None),
    ('huggingface-organization-api-token', '\\b(api_org_(?i:[a-z]{34}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('api_org_',), 2.0, 0, (), None),
    ('infracost-api-token', '\\b(ico-[a-zA-Z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('ico-',), 3.0, 0, (), None),
    ('intercom-api-key', '(?i)[\\w.-]{0,50}?(?:intercom)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9=_\\-]{60})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('intercom',), 0.0, 0, (), None),
    ('intra42-client-secret', '\\b(s-s4t2(?:ud|af)-(?i:[abcdef0123456789]{64}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('intra', 's-s4t2ud-', 's-s4t2af-'), 3.0, 0, (), None),
    ('jfrog-api-key', '(?i)[\\w.-]{0,50}?(?:jfrog|artifactory|bintray|xray)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{73})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('jfrog', 'artifactory', 'bintray', 'xray'), 0.0, 0, (), None),
    ('jfrog-identity-token', '(?i)[\\w.-]{0,50}?(?:jfrog|artifactory|bintray|xray)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('jfrog', 'artifactory', 'bintray', 'xray'), 0.0, 0, (), None),
    ('jwt', '\\b(ey[a-zA-Z0-9]{17,}\\.ey[a-zA-Z0-9\\/\\\\_-]{17,}\\.(?:[a-zA-Z0-9\\/\\\\_-]{10,}={0,2})?)(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('ey',), 3.0, 0, (), None),
    ('jwt-base64', '\\bZXlK(?:(?P<alg>aGJHY2lPaU)|(?P<apu>aGNIVWlPaU)|(?P<apv>aGNIWWlPaU)|(?P<aud>aGRXUWlPaU)|(?P<b64>aU5qUWlP)|(?P<crit>amNtbDBJanBi)|(?P<cty>amRIa2lPaU)|(?P<epk>bGNHc2lPbn)|(?P<enc>bGJtTWlPaU)|(?P<jku>cWEzVWlPaU)|(?P<jwk>cWQyc2lPb)|(?P<iss>cGMzTWlPaU)|(?P<iv>cGRpSTZJ)|(?P<kid>cmFXUWlP)|(?P<key_ops>clpYbGZiM0J6SWpwY)|(?P<kty>cmRIa2lPaUp)|(?P<nonce>dWIyNWpaU0k2)|(?P<p2c>d01tTWlP)|(?P<p2s>d01uTWlPaU)|(?P<ppt>d2NIUWlPaU)|(?P<sub>emRXSWlPaU)|(?P<svt>emRuUWlP)|(?P<tag>MFlXY2lPaU)|(?P<typ>MGVYQWlPaUp)|(?P<url>MWNtd2l)|(?P<use>MWMyVWlPaUp)|(?P<ver>MlpYSWlPaU)|(?P<version>MlpYSnphVzl1SWpv)|(?P<x>NElqb2)|(?P<x5c>NE5XTWlP)|(?P<x5t>NE5YUWlPaU)|(?P<x5ts256>NE5YUWpVekkxTmlJNkl)|(?P<x5u>NE5YVWlPaU)|(?P<zip>NmFYQWlPaU))[a-zA-Z0-9\\/\\\\_+\\-\\r\\n]{40,}={0,2}', ('zxlk',), 2.0, 0, (), None),
    ('kraken-access-token', '(?i)[\\w.-]{0,50}?(?:kraken)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9\\/=_\\+\\-]{80,90})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('kraken',), 0.0, 0, (), None),
    ('kubernetes-secret-yaml', '(?i)(?:\\bkind:[ \\t]*["\']?\\bsecret\\b["\']?(?s:.){0,200}?\\bdata:(?s:.){0,100}?\\s+([\\w.-]+:(?:[ \\t]*(?:\\||>[-+]?)\\s+)?[ \\t]*(?:["\']?[a-z0-9+/]{10,}={0,3}["\']?|\\{\\{[ \\t\\w"|$:=,.-]+}}|""|\'\'))|\\bdata:(?s:.){0,100}?\\s+([\\w.-]+:(?:[ \\t]*(?:\\||>[-+]?)\\s+)?[ \\t]*(?:["\']?[a-z0-9+/]{10,}={0,3}["\']?|\\{\\{[ \\t\\w"|$:=,.-]+}}|""|\'\'))(?s:.){0,200}?\\bkind:[ \\t]*["\']?\\bsecret\\b["\']?)', ('secret',), 0.0, 0, (('secret', 'OR', ('[\\w.-]+:(?:[ \\t]*(?:\\||>[-+]?)\\s+)?[ \\t]*(?:\\{\\{[ \\t\\w"|$:=,.-]+}}|""|\'\')',), (), ()), ('match', 'OR', ('(kind:(?s:.)+\\n---\\n(?s:.)+\\bdata:|data:(?s:.)+\\n---\\n(?s:.)+\\bkind:)',), (), ())), '(?i)\\.ya?ml$'),
    ('kucoin-access-token', '(?i)[\\w.-]{0,50}?(?:kucoin)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{24})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('kucoin',), 0.0, 0, (), None),
    ('kucoin-secret-key', '(?i)[\\w.-]{0,50}?(?:kucoin)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('kucoin',), 0.0, 0, (), None),
    ('launchdarkly-access-token', '(?i)[\\w.-]{0,50}?(?:launchdarkly)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9=_\\-]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('launchdarkly',), 0.0, 0, (), None),
    ('linear-api-key', 'lin_api_(?i:[a-z0-9]{40})', ('lin_api_',), 2.0, 0, (), None),
    ('linear-client-secret', '(?i)[\\w.-]{0,50}?(?:linear)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('linear',), 2.0, 0, (), None),
    ('linkedin-client-id', '(?i)[\\w.-]{0,50}?(?:linked[_-]?in)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{14})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('linkedin', 'linked_in', 'linked-in'), 2.0, 0, (), None),
    ('linkedin-client-secret', '(?i)[\\w.-]{0,50}?(?:linked[_-]?in)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{16})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('linkedin', 'linked_in', 'linked-in'), 2.0, 0, (), None),
    ('lob-api-key', '(?i)[\\w.-]{0,50}?(?:lob)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}((live|test)_[a-f0-9]{35})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('test_', 'live_'), 0.0, 0, (), None),
    ('lob-pub-api-key', '(?i)[\\w.-]{0,50}?(?:lob)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}((test|live)_pub_[a-f0-9]{31})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('test_pub', 'live_pub', '_pub'), 0.0, 0, (), None),
    ('looker-client-id', '(?i)[\\w.-]{0,50}?(?:looker)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{20})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('looker',), 0.0, 0, (), None),
    ('looker-client-secret', '(?i)[\\w.-]{0,50}?(?:looker)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{24})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('looker',), 0.0, 0, (), None),
    ('mailchimp-api-key', '(?i)[\\w.-]{0,50}?(?:MailchimpSDK.initialize|mailchimp)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{32}-us\\d\\d)(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('mailchimp',), 0.0, 0, (), None),
    ('mailgun-private-api-token', '(?i)[\\w.-]{0,50}?(?:mailgun)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(key-[a-f0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('mailgun',), 0.0, 0, (), None),
    ('mailgun-pub-key', '(?i)[\\w.-]{0,50}?(?:mailgun)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(pubkey-[a-f0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('mailgun',), 0.0, 0, (), None),
    ('mailgun-signing-key', '(?i)[\\w.-]{0,50}?(?:mailgun)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-h0-9]{32}-[a-h0-9]{8}-[a-h0-9]{8})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('mailgun',), 0.0, 0, (), None),
    ('mapbox-api-token', '(?i)[\\w.-]{0,50}?(?:mapbox)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(pk\\.[a-z0-9]{60}\\.[a-z0-9]{22})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('mapbox',), 0.0, 0, (), None),
    ('mattermost-access-token', '(?i)[\\w.-]{0,50}?(?:mattermost)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{26})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('mattermost',), 0.0, 0, (), None),
    ('maxmind-license-key', '\\b([A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk)(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('_mmk',), 4.0, 0, (), None),
    ('messagebird-api-token', '(?i)[\\w.-]{0,50}?(?:message[_-]?bird)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{25})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('messagebird', 'message-bird', 'message_bird'), 0.0, 0, (), None),
    ('messagebird-client-id', '(?i)[\\w.-]{0,50}?(?:message[_-]?bird)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('messagebird', 'message-bird', 'message_bird'), 0.0, 0, (), None),
    ('microsoft-teams-webhook', 'https://[a-z0-9]+\\.webhook\\.office\\.com/webhookb2/[a-z0-9]{8}-([a-z0-9]{4}-){3}[a-z0-9]{12}@[a-z0-9]{8}-([a-z0-9]{4}-){3}[a-z0-9]{12}/IncomingWebhook/[a-z0-9]{32}/[a-z0-9]{8}-([a-z0-9]{4}-){3}[a-z0-9]{12}', ('webhook.office.com', 'webhookb2', 'incomingwebhook'), 0.0, 0, (), None),
    ('netlify-access-token', '(?i)[\\w.-]{0,50}?(?:netlify)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9=_\\-]{40,46})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('netlify',), 0.0, 0, (), None),
    ('new-relic-browser-api-token', '(?i)[\\w.-]{0,50}?(?:new-relic|newrelic|new_relic)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(NRJS-[a-f0-9]{19})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('nrjs-',), 0.0, 0, (), None),
    ('new-relic-insert-key', '(?i)[\\w.-]{0,50}?(?:new-relic|newrelic|new_relic)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(NRII-[a-z0-9-]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('nrii-',), 0.0, 0, (), None),
    ('new-relic-user-api-id', '(?i)[\\w.-]{0,50}?(?:new-relic|newrelic|new_relic)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('new-relic', 'newrelic', 'new_relic'), 0.0, 0, (), None),
    ('new-relic-user-api-key', '(?i)[\\w.-]{0,50}?(?:new-relic|newrelic|new_relic)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(NRAK-[a-z0-9]{27})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('nrak',), 0.0, 0, (), None),
    ('notion-api-token', '\\b(ntn_[0-9]{11}[A-Za-z0-9]{32}[A-Za-z0-9]{3})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('ntn_',), 4.0, 0, (), None),
    ('npm-access-token', '(?i)\\b(npm_[a-z0-9]{36})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('npm_',), 2.0, 0, (), None),
    ('nuget-config-password', '(?i)<add key=\\"(?:(?:ClearText)?Password)\\"\\s*value=\\"(.{8,})\\"\\s*/>', ('<add key=',), 1.0, 0, (('secret', 'OR', ('33f!!lloppa', 'hal\\+9ooo_da!sY', '^\\%\\S.{0,1024}\\%$'), (), ()),), '(?i)nuget\\.config$'),
    ('nytimes-access-token', '(?i)[\\w.-]{0,50}?(?:nytimes|new-york-times,|newyorktimes)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9=_\\-]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('nytimes', 'new-york-times', 'newyorktimes'), 0.0, 0, (), None),
    ('octopus-deploy-api-key', '\\b(API-[A-Z0-9]{26})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('api-',), 3.0, 0, (), None),
    ('okta-access-token', '[\\w.-]{0,50}?(?i:[\\w.-]{0,50}?(?:(?-i:[Oo]kta|OKTA))(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3})(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(00[\\w=\\-]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('okta',), 4.0, 0, (), None),
    ('openai-api-key', '\\b(sk-(?:proj|svcacct|admin)-(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})T3BlbkFJ(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})\\b|sk-[a-zA-Z0-9]{20}T3BlbkFJ[a-zA-Z0-9]{20})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('t3blbkfj',), 3.0, 0, (), None),
    ('openshift-user-token', '\\b(sha256~[\\w-]{43})(?:[^\\w-]|\\Z)', ('sha256~',), 3.5, 0, (), None),
    ('perplexity-api-key', '\\b(pplx-[a-zA-Z0-9]{48})(?:[\\x60\'"\\s;]|\\\\[nr]|$|\\b)', ('pplx-',), 4.0, 0, (), None),
    ('plaid-api-token', '(?i)[\\w.-]{0,50}?(?:plaid)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(access-(?:sandbox|development|production)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('plaid',), 0.0, 0, (), None),
    ('plaid-client-id', '(?i)[\\w.-]{0,50}?(?:plaid)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{24})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('plaid',), 3.5, 0, (), None),
    ('plaid-secret-key', '(?i)[\\w.-]{0,50}?(?:plaid)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{30})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('plaid',), 3.5, 0, (), None),
    ('planetscale-api-token', '\\b(pscale_tkn_(?i:[\\w=\\.-]{32,64}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('pscale_tkn_',), 3.0, 0, (), None),
    ('planetscale-oauth-token', '\\b(pscale_oauth_[\\w=\\.-]{32,64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('pscale_oauth_',), 3.0, 0, (), None),
    ('planetscale-password', '(?i)\\b(pscale_pw_(?i:[\\w=\\.-]{32,64}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('pscale_pw_',), 3.0, 0, (), None),
    ('postman-api-token', '\\b(PMAK-(?i:[a-f0-9]{24}\\-[a-f0-9]{34}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('pmak-',), 3.0, 0, (), None),
    ('prefect-api-token', '\\b(pnu_[a-zA-Z0-9]{36})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('pnu_',), 2.0, 0, (), None),
    ('private-key', '(?i)-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\\s\\S-]{64,}?KEY(?: BLOCK)?-----', ('-----begin',), 0.0, 0, (), None),
    ('privateai-api-token', '[\\w.-]{0,50}?(?i:[\\w.-]{0,50}?(?:private[_-]?ai)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3})(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{32})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('privateai', 'private_ai', 'private-ai'), 3.0, 0, (), None),
    ('pulumi-api-token', '\\b(pul-[a-f0-9]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('pul-',), 2.0, 0, (), None),
    ('pypi-upload-token', 'pypi-AgEIcHlwaS5vcmc[\\w-]{50,1000}', ('pypi-ageichlwas5vcmc',), 3.0, 0, (), None),
    ('rapidapi-access-token', '(?i)[\\w.-]{0,50}?(?:rapidapi)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9_-]{50})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('rapidapi',), 0.0, 0, (), None),
    ('readme-api-token', '\\b(rdme_[a-z0-9]{70})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('rdme_',), 2.0, 0, (), None),
    ('rubygems-api-token', '\\b(rubygems_[a-f0-9]{48})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('rubygems_',), 2.0, 0, (), None),
    ('scalingo-api-token', '\\b(tk-us-[\\w-]{48})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('tk-us-',), 2.0, 0, (), None),
    ('sendbird-access-id', '(?i)[\\w.-]{0,50}?(?:sendbird)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sendbird',), 0.0, 0, (), None),
    ('sendbird-access-token', '(?i)[\\w.-]{0,50}?(?:sendbird)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sendbird',), 0.0, 0, (), None),
    ('sendgrid-api-token', '\\b(SG\\.(?i:[a-z0-9=_\\-\\.]{66}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sg.',), 2.0, 0, (), None),
    ('sendinblue-api-token', '\\b(xkeysib-[a-f0-9]{64}\\-(?i:[a-z0-9]{16}))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('xkeysib-',), 2.0, 0, (), None),
    ('sentry-access-token', '(?i)[\\w.-]{0,50}?(?:sentry)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sentry',), 3.0, 0, (), None),
    ('sentry-org-token', '\\bsntrys_eyJpYXQiO[a-zA-Z0-9+/]{10,200}(?:LCJyZWdpb25fdXJs|InJlZ2lvbl91cmwi|cmVnaW9uX3VybCI6)[a-zA-Z0-9+/]{10,200}={0,2}_[a-zA-Z0-9+/]{43}(?:[^a-zA-Z0-9+/]|\\Z)', ('sntrys_eyjpyxqio',), 4.5, 0, (), None),
    ('sentry-user-token', '\\b(sntryu_[a-f0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sntryu_',), 3.5, 0, (), None),
    ('settlemint-application-access-token', '\\b(sm_aat_[a-zA-Z0-9]{16})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sm_aat',), 3.0, 0, (), None),
    ('settlemint-personal-access-token', '\\b(sm_pat_[a-zA-Z0-9]{16})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sm_pat',), 3.0, 0, (), None),
    ('settlemint-service-access-token', '\\b(sm_sat_[a-zA-Z0-9]{16})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sm_sat',), 3.0, 0, (), None),
    ('shippo-api-token', '\\b(shippo_(?:live|test)_[a-fA-F0-9]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('shippo_',), 2.0, 0, (), None),
    ('shopify-access-token', 'shpat_[a-fA-F0-9]{32}', ('shpat_',), 2.0, 0, (), None),
    ('shopify-custom-access-token', 'shpca_[a-fA-F0-9]{32}', ('shpca_',), 2.0, 0, (), None),
    ('shopify-private-app-access-token', 'shppa_[a-fA-F0-9]{32}', ('shppa_',), 2.0, 0, (), None),
    ('shopify-shared-secret', 'shpss_[a-fA-F0-9]{32}', ('shpss_',), 2.0, 0, (), None),
    ('sidekiq-secret', '(?i)[\\w.-]{0,50}?(?:BUNDLE_ENTERPRISE__CONTRIBSYS__COM|BUNDLE_GEMS__CONTRIBSYS__COM)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-f0-9]{8}:[a-f0-9]{8})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('bundle_enterprise__contribsys__com', 'bundle_gems__contribsys__com'), 0.0, 0, (), None),
    ('sidekiq-sensitive-url', '(?i)\\bhttps?://([a-f0-9]{8}:[a-f0-9]{8})@(?:gems.contribsys.com|enterprise.contribsys.com)(?:[\\/|\\#|\\?|:]|$)', ('gems.contribsys.com', 'enterprise.contribsys.com'), 0.0, 0, (), None),
    ('slack-app-token', '(?i)xapp-\\d-[A-Z0-9]+-\\d+-[a-z0-9]+', ('xapp',), 2.0, 0, (), None),
    ('slack-bot-token', 'xoxb-[0-9]{10,13}-[0-9]{10,13}[a-zA-Z0-9-]*', ('xoxb',), 3.0, 0, (), None),
    ('slack-config-access-token', '(?i)xoxe.xox[bp]-\\d-[A-Z0-9]{163,166}', ('xoxe.xoxb-', 'xoxe.xoxp-'), 2.0, 0, (), None),
    ('slack-config-refresh-token', '(?i)xoxe-\\d-[A-Z0-9]{146}', ('xoxe-',), 2.0, 0, (), None),
    ('slack-legacy-bot-token', 'xoxb-[0-9]{8,14}-[a-zA-Z0-9]{18,26}', ('xoxb',), 2.0, 0, (), None),
    ('slack-legacy-token', 'xox[os]-\\d+-\\d+-\\d+-[a-fA-F\\d]+', ('xoxo', 'xoxs'), 2.0, 0, (), None),
    ('slack-legacy-workspace-token', 'xox[ar]-(?:\\d-)?[0-9a-zA-Z]{8,48}', ('xoxa', 'xoxr'), 2.0, 0, (), None),
    ('slack-user-token', 'xox[pe](?:-[0-9]{10,13}){3}-[a-zA-Z0-9-]{28,34}', ('xoxp-', 'xoxe-'), 2.0, 0, (), None),
    ('slack-webhook-url', '(?:https?://)?hooks.slack.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56}', ('hooks.slack.com',), 0.0, 0, (), None),
    ('snyk-api-token', '(?i)[\\w.-]{0,50}?(?:snyk[_.-]?(?:(?:api|oauth)[_.-]?)?(?:key|token))(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('snyk',), 0.0, 0, (), None),
    ('sonar-api-token', '(?i)[\\w.-]{0,50}?(?:sonar[_.-]?(login|token))(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}((?:squ_|sqp_|sqa_)?[a-z0-9=_\\-]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sonar',), 0.0, 2, (), None),
    ('sourcegraph-access-token', '(?i)\\b(\\b(sgp_(?:[a-fA-F0-9]{16}|local)_[a-fA-F0-9]{40}|sgp_[a-fA-F0-9]{40}|[a-fA-F0-9]{40})\\b)(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sgp_', 'sourcegraph'), 3.0, 0, (), None),
    ('square-access-token', '\\b((?:EAAA|sq0atp-)[\\w-]{22,60})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sq0atp-', 'eaaa'), 2.0, 0, (), None),
    ('squarespace-access-token', '(?i)[\\w.-]{0,50}?(?:squarespace)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('squarespace',), 0.0, 0, (), None),
    ('stripe-access-token', '\\b((?:sk|rk)_(?:test|live|prod)_[a-zA-Z0-9]{10,99})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sk_test', 'sk_live', 'sk_prod', 'rk_test', 'rk_live', 'rk_prod'), 2.0, 0, (), None),
    ('sumologic-access-id', '[\\w.-]{0,50}?(?i:[\\w.-]{0,50}?(?:(?-i:[Ss]umo|SUMO))(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3})(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(su[a-zA-Z0-9]{12})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sumo',), 3.0, 0, (), None),
    ('sumologic-access-token', '(?i)[\\w.-]{0,50}?(?:(?-i:[Ss]umo|SUMO))(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{64})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('sumo',), 3.0, 0, (), None),
    ('telegram-bot-api-token', '(?i)[\\w.-]{0,50}?(?:telegr)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9]{5,16}:(?-i:A)[a-z0-9_\\-]{34})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('telegr',), 0.0, 0, (), None),
    ('travisci-access-token', '(?i)[\\w.-]{0,50}?(?:travis)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{22})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('travis',), 0.0, 0, (), None),
    ('twilio-api-key', 'SK[0-9a-fA-F]{32}', ('sk',), 3.0, 0, (), None),
    ('twitch-api-token', '(?i)[\\w.-]{0,50}?(?:twitch)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{30})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('twitch',), 0.0, 0, (), None),
    ('twitter-access-secret', '(?i)[\\w.-]{0,50}?(?:twitter)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{45})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('twitter',), 0.0, 0, (), None),
    ('twitter-access-token', '(?i)[\\w.-]{0,50}?(?:twitter)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([0-9]{15,25}-[a-zA-Z0-9]{20,40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('twitter',), 0.0, 0, (), None),
    ('twitter-api-key', '(?i)[\\w.-]{0,50}?(?:twitter)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{25})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('twitter',), 0.0, 0, (), None),
    ('twitter-api-secret', '(?i)[\\w.-]{0,50}?(?:twitter)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{50})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('twitter',), 0.0, 0, (), None),
    ('twitter-bearer-token', '(?i)[\\w.-]{0,50}?(?:twitter)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(A{22}[a-zA-Z0-9%]{80,100})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('twitter',), 0.0, 0, (), None),
    ('typeform-api-token', '(?i)[\\w.-]{0,50}?(?:typeform)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(tfp_[a-z0-9\\-_\\.=]{59})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('tfp_',), 0.0, 0, (), None),
    ('vault-batch-token', '\\b(hvb\\.[\\w-]{138,300})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('hvb.',), 4.0, 0, (), None),
    ('vault-service-token', '\\b((?:hvs\\.[\\w-]{90,120}|s\\.(?i:[a-z0-9]{24})))(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('hvs.', 's.'), 3.5, 0, (('secret', 'OR', ('s\\.[A-Za-z]{24}',), (), ()),), None),
    ('yandex-access-token', '(?i)[\\w.-]{0,50}?(?:yandex)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(t1\\.[A-Z0-9a-z_-]+[=]{0,2}\\.[A-Z0-9a-z_-]{86}[=]{0,2})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('yandex',), 0.0, 0, (), None),
    ('yandex-api-key', '(?i)[\\w.-]{0,50}?(?:yandex)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(AQVN[A-Za-z0-9_\\-]{35,38})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('yandex',), 0.0, 0, (), None),
    ('yandex-aws-access-token', '(?i)[\\w.-]{0,50}?(?:yandex)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}(YC[a-zA-Z0-9_\\-]{38})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('yandex',), 0.0, 0, (), None),
    ('zendesk-secret-key', '(?i)[\\w.-]{0,50}?(?:zendesk)(?:[ \\t\\w.-]{0,20})[\\s\'"]{0,3}(?:=|>|:{1,3}=|\\|\\||:|=>|\\?=|,)[\\x60\'"\\s=]{0,5}([a-z0-9]{40})(?:[\\x60\'"\\s;]|\\\\[nr]|$)', ('zendesk',), 0.0, 0, (), None),
)

GLOBAL_ALLOW_REGEXES = ('(?i)^true|false|null$', '^(?i:a+|b+|c+|d+|e+|f+|g+|h+|i+|j+|k+|l+|m+|n+|o+|p+|q+|r+|s+|t+|u+|v+|w+|x+|y+|z+|\\*+|\\.+)$', '^\\$(?:\\d+|{\\d+})$', '^\\$(?:[A-Z_]+|[a-z_]+)$', '^\\${(?:[A-Z_]+|[a-z_]+)}$', '^\\{\\{[ \\t]*[\\w ().|]+[ \\t]*}}$', '^\\$\\{\\{[ \\t]*(?:(?:env|github|secrets|vars)(?:\\.[A-Za-z]\\w+)+[\\w "\'&./=|]*)[ \\t]*}}$', '^%(?:[A-Z_]+|[a-z_]+)%$', '^%[+\\-# 0]?[bcdeEfFgGoOpqstTUvxX]$', '^\\{\\d{0,2}}$', '^@(?:[A-Z_]+|[a-z_]+)@$', '^/Users/(?i:[a-z0-9]+/[\\w .-/]+$)', '^/(?:bin|etc|home|opt|tmp|usr|var)/[\\w ./-]+$')

GLOBAL_STOPWORDS = ('014df517-39d1-4453-b7b3-9930c563627c', 'abcdefghijklmnopqrstuvwxyz')

#: per rule (id, then numbers read from its parsed regex): the longest run of letters,
#: digits and _-.+/=~ every match holds; the run characters every match starts with,
#: one after the other; the most characters a match can span (0: unbounded or over
#: 4,096); 1 when every match holds one of the rule's keywords
_SHAPES = """
1password-secret-key 39 39 40 1
1password-service-account-token 257 257 0 1
adafruit-api-key 32 8 124 1
adobe-client-id 32 5 121 1
adobe-client-secret 36 36 38 1
age-secret-key 74 74 74 1
airtable-api-key 17 8 109 1
airtable-personnal-access-token 82 82 82 0
algolia-api-key 32 7 123 1
alibaba-access-key-id 24 24 26 1
alibaba-secret-key 30 7 121 1
anthropic-admin-api-key 110 110 112 1
anthropic-api-key 108 108 110 1
artifactory-api-key 73 73 73 1
artifactory-reference-token 64 64 64 1
asana-client-id 16 5 105 1
asana-client-secret 32 5 121 1
atlassian-api-token 24 4 194 1
authress-service-client-access-key 59 59 206 1
aws-access-token 20 20 20 1
aws-amazon-bedrock-api-key-long-lived 113 113 277 1
aws-amazon-bedrock-api-key-short-lived 44 44 44 1
azure-ad-client-secret 37 0 42 1
beamer-api-token 46 6 136 1
bitbucket-client-id 32 9 125 1
bitbucket-client-secret 64 9 157 1
bittrex-access-key 32 7 123 1
bittrex-secret-key 32 7 123 1
cisco-meraki-api-key 40 6 180 1
clickhouse-cloud-api-secret-key 42 42 42 1
clojars-api-token 68 68 68 1
cloudflare-api-key 40 10 134 1
cloudflare-global-api-key 37 10 131 1
cloudflare-origin-ca-key 176 176 178 1
codecov-access-token 32 7 123 1
cohere-api-token 40 6 184 1
coinbase-access-token 64 8 156 1
confluent-access-token 16 9 109 1
confluent-secret-key 64 9 157 1
contentful-delivery-api-token 43 10 137 1
curl-auth-header 4 4 0 1
curl-auth-user 4 4 0 1
databricks-api-token 36 36 40 1
datadog-access-token 40 7 131 1
defined-networking-api-token 85 5 174 1
digitalocean-access-token 71 71 73 1
digitalocean-pat 71 71 73 1
digitalocean-refresh-token 71 71 73 1
discord-api-token 64 7 155 1
discord-client-id 18 7 109 1
discord-client-secret 32 7 123 1
doppler-api-token 49 49 49 1
droneci-access-token 32 7 123 1
dropbox-api-token 15 7 106 1
dropbox-long-lived-api-token 64 7 155 1
dropbox-short-lived-api-token 138 7 229 1
duffel-api-token 55 55 55 1
dynatrace-api-token 96 96 96 1
easypost-api-token 58 58 58 1
easypost-test-api-token 58 58 58 1
etsy-access-token 24 4 112 1
facebook-access-token 27 15 59 0
facebook-page-access-token 104 104 0 1
facebook-secret 32 8 124 1
fastly-api-token 32 6 122 1
finicity-api-token 32 8 124 1
finicity-client-secret 20 8 112 1
finnhub-access-token 20 7 111 1
flickr-access-token 32 6 122 1
flutterwave-encryption-key 25 25 25 1
flutterwave-public-key 47 47 47 1
flutterwave-secret-key 47 47 47 1
flyio-access-token 47 47 0 1
frameio-api-token 70 70 70 1
freemius-secret-key 10 0 0 1
freshbooks-access-token 64 10 158 1
gcp-api-key 39 39 41 1
github-app-token 40 40 40 1
github-fine-grained-pat 93 93 93 1
github-oauth 40 40 40 1
github-pat 40 40 40 1
github-refresh-token 40 40 40 1
gitlab-cicd-job-token 28 28 32 1
gitlab-deploy-token 25 25 25 1
gitlab-feature-flag-client-token 27 27 27 1
gitlab-feed-token 25 25 25 1
gitlab-incoming-mail-token 31 31 31 1
gitlab-kubernetes-agent-token 58 58 58 1
gitlab-oauth-app-secret 70 70 70 1
gitlab-pat 26 26 26 1
gitlab-pat-routable 43 43 316 1
gitlab-ptt 46 46 46 1
gitlab-rrt 29 29 29 1
gitlab-runner-authentication-token 25 25 25 1
gitlab-runner-authentication-token-routable 45 45 318 1
gitlab-scim-token 27 27 27 1
gitlab-session-cookie 48 48 48 1
gitter-access-token 40 6 130 1
gocardless-api-token 45 10 139 1
grafana-api-key 78 78 413 1
grafana-cloud-api-token 36 36 409 1
grafana-service-account-token 46 46 48 1
harness-api-key 72 72 72 1
hashicorp-tf-api-token 83 83 93 1
hashicorp-tf-password 8 8 134 1
heroku-api-key 36 6 126 1
heroku-api-key-v2 65 65 67 1
hubspot-api-key 36 7 127 1
huggingface-access-token 37 37 39 1
huggingface-organization-api-token 42 42 44 1
infracost-api-token 36 36 38 1
intercom-api-key 60 8 152 1
intra42-client-secret 73 73 75 1
jfrog-api-key 73 4 168 1
jfrog-identity-token 64 4 159 1
jwt 22 22 0 1
jwt-base64 10 10 0 1
kraken-access-token 80 6 180 1
kubernetes-secret-yaml 6 4 0 1
kucoin-access-token 24 6 114 1
kucoin-secret-key 36 6 126 1
launchdarkly-access-token 40 12 136 1
linear-api-key 48 48 48 1
linear-client-secret 32 6 122 1
linkedin-client-id 14 8 107 1
linkedin-client-secret 16 8 109 1
lob-api-key 40 3 127 1
lob-pub-api-key 40 3 127 1
looker-client-id 20 6 110 1
looker-client-secret 24 6 114 1
mailchimp-api-key 37 9 144 1
mailgun-private-api-token 36 7 127 1
mailgun-pub-key 39 7 130 1
mailgun-signing-key 50 7 141 1
mapbox-api-token 86 6 176 1
mattermost-access-token 26 10 120 1
maxmind-license-key 40 40 42 1
messagebird-api-token 25 11 121 1
messagebird-client-id 36 11 132 1
microsoft-teams-webhook 122 5 0 1
netlify-access-token 40 7 137 1
new-relic-browser-api-token 24 8 117 1
new-relic-insert-key 37 8 130 1
new-relic-user-api-id 64 8 157 1
new-relic-user-api-key 32 8 125 1
notion-api-token 50 50 52 1
npm-access-token 40 40 42 1
nuget-config-password 8 0 0 1
nytimes-access-token 32 7 131 1
octopus-deploy-api-key 30 30 32 1
okta-access-token 42 4 180 1
openai-api-key 51 51 169 1
openshift-user-token 50 50 51 1
perplexity-api-key 53 53 55 1
plaid-api-token 51 5 144 1
plaid-client-id 24 5 113 1
plaid-secret-key 30 5 119 1
planetscale-api-token 43 43 77 1
planetscale-oauth-token 45 45 79 1
planetscale-password 42 42 76 1
postman-api-token 64 64 66 1
prefect-api-token 40 40 42 1
private-key 10 10 0 1
privateai-api-token 32 9 176 1
pulumi-api-token 44 44 46 1
pypi-upload-token 70 70 1020 1
rapidapi-access-token 50 8 142 1
readme-api-token 75 75 77 1
rubygems-api-token 57 57 59 1
scalingo-api-token 54 54 56 1
sendbird-access-id 36 8 128 1
sendbird-access-token 40 8 132 1
sendgrid-api-token 69 69 71 1
sendinblue-api-token 89 89 91 1
sentry-access-token 64 6 154 1
sentry-org-token 96 96 479 1
sentry-user-token 71 71 73 1
settlemint-application-access-token 23 23 25 1
settlemint-personal-access-token 23 23 25 1
settlemint-service-access-token 23 23 25 1
shippo-api-token 52 52 54 1
shopify-access-token 38 38 38 1
shopify-custom-access-token 38 38 38 1
shopify-private-app-access-token 38 38 38 1
shopify-shared-secret 38 38 38 1
sidekiq-secret 28 28 135 1
sidekiq-sensitive-url 10 4 52 0
slack-app-token 12 12 0 1
slack-bot-token 26 26 0 1
slack-config-access-token 170 4 178 0
slack-config-refresh-token 153 153 153 1
slack-legacy-bot-token 32 32 46 1
slack-legacy-token 12 12 0 1
slack-legacy-workspace-token 13 13 55 1
slack-user-token 66 66 81 1
slack-webhook-url 56 0 90 0
snyk-api-token 36 7 136 1
sonar-api-token 40 10 139 1
sourcegraph-access-token 40 40 63 0
square-access-token 26 26 69 1
squarespace-access-token 36 11 131 1
stripe-access-token 18 18 109 1
sumologic-access-id 14 4 152 1
sumologic-access-token 64 4 152 1
telegram-bot-api-token 35 6 142 1
travisci-access-token 22 6 112 1
twilio-api-key 34 34 34 1
twitch-api-token 30 6 120 1
twitter-access-secret 45 7 136 1
twitter-access-token 36 7 157 1
twitter-api-key 25 7 116 1
twitter-api-secret 50 7 141 1
twitter-bearer-token 22 7 213 1
typeform-api-token 63 8 155 1
vault-batch-token 142 142 306 1
vault-service-token 26 26 126 1
yandex-access-token 91 6 0 1
yandex-api-key 39 6 132 1
yandex-aws-access-token 40 6 130 1
zendesk-secret-key 40 7 131 1
"""
_ROWS = [row.split() for row in _SHAPES.split("\n") if row]
#: rule id -> the longest run of letters, digits and _-.+/=~ every match holds
RUN_LENGTH = {r[0]: int(r[1]) for r in _ROWS}
#: rule id -> the run characters every match starts with, one after the other (rules with none left out)
LEAD_RUN = {r[0]: int(r[2]) for r in _ROWS if r[2] != "0"}
#: rule id -> the most characters a match can span (0: unbounded or over 4,096)
MAX_WIDTH = {r[0]: int(r[3]) for r in _ROWS}
#: rules every match of which holds one of their keywords (from each parsed regex)
KEYWORD_IN_MATCH = tuple(r[0] for r in _ROWS if r[4] == "1")
del _ROWS

#: rule id -> the fixed texts (lowercased) one of which every match starts with
STARTS = {
    '1password-secret-key': ('a3-',), '1password-service-account-token': ('ops_eyj',), 'adobe-client-secret': ('p8e-',), 'age-secret-key': ('age-secret-key-1',), 'airtable-personnal-access-token': ('pat',), 'alibaba-access-key-id': ('ltai',), 'anthropic-admin-api-key': ('sk-ant-admin01-',), 'anthropic-api-key': ('sk-ant-api03-',), 'artifactory-api-key': ('akcp',), 'artifactory-reference-token': ('cmvmd',),
    'authress-service-client-access-key': ('authress_', 'ext_', 'sc_', 'scauth_'), 'aws-access-token': ('a3t', 'abia', 'acca', 'akia', 'asia'), 'aws-amazon-bedrock-api-key-long-lived': ('absk',), 'aws-amazon-bedrock-api-key-short-lived': ('bedrock-api-key-ymvkcm9jay5hbwf6b25hd3muy29t',), 'clickhouse-cloud-api-secret-key': ('4b1d',), 'clojars-api-token': ('clojars_',), 'cloudflare-origin-ca-key': ('v1.0-',), 'curl-auth-header': ('curl',), 'curl-auth-user': ('curl',),
    'databricks-api-token': ('dapi',), 'digitalocean-access-token': ('doo_v1_',), 'digitalocean-pat': ('dop_v1_',), 'digitalocean-refresh-token': ('dor_v1_',), 'doppler-api-token': ('dp.pt.',), 'duffel-api-token': ('duffel_live_', 'duffel_test_'), 'dynatrace-api-token': ('dt0c01.',), 'easypost-api-token': ('ezak',), 'easypost-test-api-token': ('eztk',), 'facebook-page-access-token': ('eaac', 'eaam'), 'flutterwave-encryption-key': ('flwseck_test-',),
    'flutterwave-public-key': ('flwpubk_test-',), 'flutterwave-secret-key': ('flwseck_test-',), 'flyio-access-token': ('fm1a_', 'fm1r_', 'fm2_', 'fo1_'), 'frameio-api-token': ('fio-u-',), 'freemius-secret-key': ('"secret_key"', '"secret_key\'', '\'secret_key"', "'secret_key'"), 'gcp-api-key': ('aiza',), 'github-app-token': ('ghs_', 'ghu_'), 'github-fine-grained-pat': ('github_pat_',), 'github-oauth': ('gho_',), 'github-pat': ('ghp_',), 'github-refresh-token': ('ghr_',),
    'gitlab-cicd-job-token': ('glcbt-',), 'gitlab-deploy-token': ('gldt-',), 'gitlab-feature-flag-client-token': ('glffct-',), 'gitlab-feed-token': ('glft-',), 'gitlab-incoming-mail-token': ('glimt-',), 'gitlab-kubernetes-agent-token': ('glagent-',), 'gitlab-oauth-app-secret': ('gloas-',), 'gitlab-pat': ('glpat-',), 'gitlab-pat-routable': ('glpat-',), 'gitlab-ptt': ('glptt-',), 'gitlab-rrt': ('gr1348941',), 'gitlab-runner-authentication-token': ('glrt-',),
    'gitlab-runner-authentication-token-routable': ('glrt-t',), 'gitlab-scim-token': ('glsoat-',), 'gitlab-session-cookie': ('_gitlab_session=',), 'grafana-api-key': ('eyjrijoi',), 'grafana-cloud-api-token': ('glc_',), 'grafana-service-account-token': ('glsa_',), 'harness-api-key': ('pat.', 'sat.'), 'heroku-api-key-v2': ('hrku-aa',), 'huggingface-access-token': ('hf_',), 'huggingface-organization-api-token': ('api_org_',), 'infracost-api-token': ('ico-',),
    'intra42-client-secret': ('s-s4t2af-', 's-s4t2ud-'), 'jwt': ('ey',), 'kubernetes-secret-yaml': ('data:', 'kind:'), 'linear-api-key': ('lin_api_',), 'microsoft-teams-webhook': ('https://',), 'notion-api-token': ('ntn_',), 'npm-access-token': ('npm_',), 'nuget-config-password': ('<add key="cleartextpassword"', '<add key="password"'), 'octopus-deploy-api-key': ('api-',), 'openai-api-key': ('sk-', 'sk-admin-', 'sk-proj-', 'sk-svcacct-'), 'openshift-user-token': ('sha256~',),
    'perplexity-api-key': ('pplx-',), 'planetscale-api-token': ('pscale_tkn_',), 'planetscale-oauth-token': ('pscale_oauth_',), 'planetscale-password': ('pscale_pw_',), 'postman-api-token': ('pmak-',), 'prefect-api-token': ('pnu_',), 'private-key': ('-----begin',), 'pulumi-api-token': ('pul-',), 'pypi-upload-token': ('pypi-ageichlwas5vcmc',), 'readme-api-token': ('rdme_',), 'rubygems-api-token': ('rubygems_',), 'scalingo-api-token': ('tk-us-',), 'sendgrid-api-token': ('sg.',),
    'sendinblue-api-token': ('xkeysib-',), 'sentry-org-token': ('sntrys_eyjpyxqio',), 'sentry-user-token': ('sntryu_',), 'settlemint-application-access-token': ('sm_aat_',), 'settlemint-personal-access-token': ('sm_pat_',), 'settlemint-service-access-token': ('sm_sat_',), 'shippo-api-token': ('shippo_live_', 'shippo_test_'), 'shopify-access-token': ('shpat_',), 'shopify-custom-access-token': ('shpca_',), 'shopify-private-app-access-token': ('shppa_',),
    'shopify-shared-secret': ('shpss_',), 'sidekiq-sensitive-url': ('http://', 'https://'), 'slack-app-token': ('xapp-',), 'slack-bot-token': ('xoxb-',), 'slack-config-access-token': ('xoxe',), 'slack-config-refresh-token': ('xoxe-',), 'slack-legacy-bot-token': ('xoxb-',), 'slack-legacy-token': ('xoxo-', 'xoxs-'), 'slack-legacy-workspace-token': ('xoxa-', 'xoxr-'), 'slack-user-token': ('xoxe-', 'xoxp-'), 'slack-webhook-url': ('hooks', 'http://hooks', 'https://hooks'),
    'square-access-token': ('eaaa', 'sq0atp-'), 'stripe-access-token': ('rk_live_', 'rk_prod_', 'rk_test_', 'sk_live_', 'sk_prod_', 'sk_test_'), 'twilio-api-key': ('sk',), 'vault-batch-token': ('hvb.',), 'vault-service-token': ('hvs.', 's.'),
}

#: rules with a path condition: applied only to text whose file path matches
PATH_ONLY = ('freemius-secret-key', 'hashicorp-tf-password', 'kubernetes-secret-yaml', 'nuget-config-password')

#: rules that could not be translated, with the reason
UNTRANSLATED = (('pkcs12-file', 'no regex: only a path condition ((?i)(?:^|\\/)[^\\/]+\\.p(?:12|fx)$)'),)

#: rules left out on purpose, with the reason
LEFT_OUT = (('generic-api-key', 'our keyword rule (generic-secret) covers it, and it would redact ordinary code in tool output'),)
