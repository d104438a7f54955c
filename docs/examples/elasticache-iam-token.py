#!/usr/bin/env python3
# elasticache-iam-token.py CACHE USER REGION [serverless]: prints an IAM auth token for
# ElastiCache, for rlock's --password-command (see docs/guide.md, "Passwords from a command").
# CACHE is the replication group id (or the serverless cache's name), in lower case.
# Needs botocore (pip install botocore) and credentials allowed elasticache:Connect.
import sys
from urllib.parse import urlencode

import botocore.session
from botocore.model import ServiceId
from botocore.signers import RequestSigner

cache, user, region = sys.argv[1:4]
query = {"Action": "connect", "User": user}
if sys.argv[4:] == ["serverless"]:
    query["ResourceType"] = "ServerlessCache"
session = botocore.session.get_session()
signer = RequestSigner(ServiceId("elasticache"), region, "elasticache", "v4",
                       session.get_credentials(), session.get_component("event_emitter"))
url = signer.generate_presigned_url(
    {"method": "GET", "url": f"https://{cache}/?{urlencode(query)}", "body": {},
     "headers": {}, "context": {}},
    operation_name="connect", expires_in=900, region_name=region)
# The token is the signed request without its scheme.
print(url.removeprefix("https://"))
