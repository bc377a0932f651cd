"""The CDK app of Tornasole: configuration, constructs (one concern each) and the stack that composes them."""
